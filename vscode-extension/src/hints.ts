// Pure logic of the end-of-line hints (no vscode import, so unit tests run in plain Node).

export type Severity = "error" | "warning" | "info";

export interface LineFinding {
  kind: string;
  severity: Severity;
  message: string;
}

export interface TracedLine {
  line: number; // 0-based, in the document version of the update
  label: string;
  hits: number;
  findings: LineFinding[];
}

export interface TraceUpdate {
  uri: string;
  version: number | null;
  lines: TracedLine[];
}

export type HintTone = "hint" | "warning" | "error";

export interface Hint {
  line: number;
  text: string;
  tone: HintTone;
}

const MARKS: Record<Severity, string> = { error: "✖", warning: "⚠", info: "ℹ" };

/** One hint per line: the server's label (it decides what a line says: compact, full,
 * coverage), then the findings' kinds, cut to `maxLength`. */
export function buildHints(lines: readonly TracedLine[], maxLength: number): Hint[] {
  const hints: Hint[] = [];
  for (const entry of lines) {
    const parts: string[] = [];
    if (entry.label) {
      parts.push(entry.label);
    }
    for (const finding of entry.findings) {
      parts.push(`${MARKS[finding.severity] ?? "•"} ${finding.kind.replace(/_/g, " ")}`);
    }
    if (parts.length === 0) {
      continue;
    }
    hints.push({ line: entry.line, text: truncate(parts.join("  "), maxLength), tone: toneOf(entry.findings) });
  }
  return hints;
}

export function truncate(text: string, maxLength: number): string {
  const chars = Array.from(text); // never cut a surrogate pair in half
  return chars.length <= maxLength ? text : chars.slice(0, Math.max(1, maxLength - 1)).join("") + "…";
}

function toneOf(findings: readonly LineFinding[]): HintTone {
  if (findings.some((f) => f.severity === "error")) {
    return "error";
  }
  return findings.some((f) => f.severity === "warning") ? "warning" : "hint";
}

export interface LineEdit {
  startLine: number;
  endLine: number; // inclusive: the last line the replaced range touches
  insertedLines: number; // line breaks in the inserted text
}

/**
 * Applies edits to hints at once, before the server answers: hints on touched lines go
 * (never stale text), hints below move by the number of lines added or removed.
 */
export function applyEdits(hints: readonly Hint[], edits: readonly LineEdit[]): Hint[] {
  let current = [...hints];
  for (const edit of edits) {
    const delta = edit.insertedLines - (edit.endLine - edit.startLine);
    current = current
      .filter((hint) => hint.line < edit.startLine || hint.line > edit.endLine)
      .map((hint) => (hint.line > edit.endLine ? { ...hint, line: hint.line + delta } : hint));
  }
  return current;
}
