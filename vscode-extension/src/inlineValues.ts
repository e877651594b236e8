// Pure logic of tensor inline values: parse the helper's output and place each value on
// the line that last bound the variable (no vscode import: unit-tested in plain Node).

export interface InlineTensor {
  name: string; // `pred`, `batch['x']`, `pair[0]`
  label: string; // `(4,1) f32 cpu grad`
  line: number; // 0-based line where it is shown
}

/** The DAP `result` is the repr of a Python string: strip the quotes and unescape. */
export function parseHelperResult(result: string): Map<string, string> {
  let text = result;
  if (text.length >= 2 && (text[0] === "'" || text[0] === '"') && text[text.length - 1] === text[0]) {
    text = text
      .slice(1, -1)
      .replace(/\\t/g, "\t")
      .replace(/\\n/g, "\n")
      .replace(/\\'/g, "'")
      .replace(/\\\\/g, "\\");
  }
  const values = new Map<string, string>();
  for (const row of text.split("\n")) {
    const tab = row.indexOf("\t");
    if (tab > 0) {
      values.set(row.slice(0, tab), row.slice(tab + 1));
    }
  }
  return values;
}

function escape(name: string): string {
  return name.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** The last line in [first, last] that binds `base` (assignment, for target, def argument). */
export function bindingLine(lines: readonly string[], base: string, first: number, last: number): number | undefined {
  const name = escape(base);
  const patterns = [
    new RegExp(`(^|[\\s,(])${name}\\s*(:[^=]*)?(=(?!=)|[-+*/@%&|^]=)`),
    new RegExp(`^\\s*(async\\s+)?for\\s+.*\\b${name}\\b.*\\sin\\s`),
    new RegExp(`^\\s*(async\\s+)?def\\s+\\w+\\s*\\(.*\\b${name}\\b`),
    new RegExp(`\\bas\\s+${name}\\b`),
  ];
  for (let line = Math.min(last, lines.length - 1); line >= Math.max(first, 0); line--) {
    if (patterns.some((pattern) => pattern.test(lines[line]))) {
      return line;
    }
  }
  return undefined;
}

export function placeInlineValues(
  values: Map<string, string>,
  lines: readonly string[],
  first: number,
  stoppedLine: number,
): InlineTensor[] {
  const placed: InlineTensor[] = [];
  for (const [name, label] of values) {
    const base = name.split(/[[.]/)[0];
    const line = bindingLine(lines, base, first, stoppedLine);
    if (line !== undefined) {
      placed.push({ name, label, line });
    }
  }
  return placed.sort((a, b) => a.line - b.line || a.name.localeCompare(b.name));
}
