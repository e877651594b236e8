// Notebooks: which documents the client serves, and the code that makes a Jupyter kernel trace
// itself (`%load_ext shapelens`). Pure logic (no vscode import), so unit tests run in plain Node.

/** The scheme of a notebook cell's text document (`vscode-notebook-cell:/…/x.ipynb#W0sZmlsZQ%3D%3D`). */
export const CELL_SCHEME = "vscode-notebook-cell";

/**
 * The language client's document selector: Python files on disk, and the Python cells of any
 * notebook. The notebook filter lets vscode-languageclient hand cells to the server's
 * notebookDocumentSync; the cell scheme also matches cells when the server declares none
 * (they are then synced as plain text documents).
 */
export const DOCUMENT_SELECTOR = [
  { scheme: "file", language: "python" },
  { notebook: "*", language: "python" },
  { scheme: CELL_SCHEME, language: "python" },
] as const;

/** The trace files notebook kernels write (`%load_ext shapelens`), in any `.shapelens` folder. */
export const KERNEL_TRACE_GLOB = "**/.shapelens/kernel-*.json";

/** The first word of the line the setup code prints: the rest is JSON ({@link KernelReport}). */
export const REPORT_MARKER = "shapelens-kernel:";

/** A Python string literal of `text` (a JSON string is one: `\"`, `\\`, `\uXXXX` mean the same). */
export function pythonString(text: string): string {
  return JSON.stringify(text);
}

/**
 * What "ShapeLens: Trace this Notebook's Kernel" runs in the kernel (through the Jupyter
 * extension, outside the notebook's cells). `shapelens` comes from the kernel's own environment
 * when it has it; otherwise the extension's bundled libraries are appended to `sys.path` (after
 * the kernel's own packages, which keep winning). Then the IPython extension is loaded, and one
 * line says how it went.
 */
export function kernelSetupCode(bundledLibs: string): string {
  return [
    "import importlib.util as _sl_util, json as _sl_json, os as _sl_os, sys as _sl_sys",
    `if _sl_util.find_spec("shapelens") is None and ${pythonString(bundledLibs)} not in _sl_sys.path:`,
    `    _sl_sys.path.append(${pythonString(bundledLibs)})`,
    '_sl_result = get_ipython().extension_manager.load_extension("shapelens")',
    "print(" +
      `${pythonString(REPORT_MARKER)} + _sl_json.dumps({` +
      '"result": _sl_result or "loaded", ' +
      '"module": getattr(_sl_sys.modules.get("shapelens"), "__file__", None), ' +
      '"cwd": _sl_os.getcwd(), ' +
      '"trace_dir": _sl_os.environ.get("SHAPELENS_TRACE_DIR")}))',
    "del _sl_util, _sl_json, _sl_os, _sl_sys, _sl_result",
    "",
  ].join("\n");
}

/** The lines a user runs in a cell to do the same by hand. */
export function manualLines(bundledLibs: string): string[] {
  return [`import sys; sys.path.append(${pythonString(bundledLibs)})`, "%load_ext shapelens"];
}

/** The notification shown when no kernel can be reached: what to run, in one line. */
export function manualMessage(bundledLibs: string, why: string): string {
  const [pathLine, loadLine] = manualLines(bundledLibs);
  return `ShapeLens: ${why} To trace this notebook's kernel, run in a cell: ${pathLine} then ${loadLine}`;
}

/** One item of a kernel output, as the Jupyter extension's `kernel.executeCode` yields them. */
export interface KernelOutputItem {
  mime: string;
  data: Uint8Array;
}

/** The mime type of an error (its data: JSON `{name, message, stack}`). */
export const ERROR_MIME = "application/vnd.code.notebook.error";

/**
 * Collects what the kernel printed (stdout, plain text results) and its errors; stderr goes to
 * `warn`. An exception from the iteration (the kernel died, the API refused) is an error too.
 */
export async function collectKernelOutputs(
  outputs: AsyncIterable<{ items: readonly KernelOutputItem[] }>,
  warn: (text: string) => void,
): Promise<{ stdout: string; errors: string[] }> {
  let stdout = "";
  const errors: string[] = [];
  const decoder = new TextDecoder();
  try {
    for await (const output of outputs) {
      for (const item of output.items) {
        const text = decoder.decode(item.data);
        if (item.mime === ERROR_MIME) {
          errors.push(errorText(text));
        } else if (item.mime.includes("stderr")) {
          warn(text.trimEnd());
        } else if (item.mime.includes("stdout") || item.mime === "text/plain") {
          stdout += text;
        }
      }
    }
  } catch (error) {
    errors.push(error instanceof Error ? error.message : String(error));
  }
  return { stdout, errors };
}

/** An error output item's JSON ({name, message, stack}) as one line. */
function errorText(json: string): string {
  try {
    const error = JSON.parse(json) as { name?: string; message?: string };
    return [error.name, error.message].filter(Boolean).join(": ") || json;
  } catch {
    return json;
  }
}

/** What the setup code's report line says. */
export interface KernelReport {
  result: string; // "loaded", "already loaded", "no load function"
  module: string | null;
  cwd: string;
  trace_dir: string | null;
}

export type KernelOutcome =
  | { ok: true; report: KernelReport; message: string }
  | { ok: false; message: string };

/**
 * Reads the kernel's outputs (stdout text, error texts) after the setup code ran: a report line
 * that says loaded is success; an error, or a missing or negative report, is failure.
 */
export function readKernelOutcome(stdout: string, errors: readonly string[]): KernelOutcome {
  if (errors.length > 0) {
    return { ok: false, message: `the kernel could not load ShapeLens: ${errors.join("; ")}` };
  }
  const line = stdout
    .split(/\r?\n/)
    .reverse()
    .find((text) => text.startsWith(REPORT_MARKER));
  if (!line) {
    return { ok: false, message: `the kernel gave no answer${stdout.trim() ? `: ${stdout.trim()}` : ""}` };
  }
  let report: KernelReport;
  try {
    report = JSON.parse(line.slice(REPORT_MARKER.length)) as KernelReport;
  } catch {
    return { ok: false, message: `the kernel's answer is not readable: ${line}` };
  }
  if (report.result === "no load function") {
    return {
      ok: false,
      message: `the kernel's shapelens (${report.module ?? "?"}) is too old to trace notebooks (it has no load_ipython_extension)`,
    };
  }
  const where = report.trace_dir ?? joinPath(report.cwd, ".shapelens");
  const again = report.result === "already loaded" ? " (it already did)" : "";
  return {
    ok: true,
    report,
    message: `ShapeLens traces this notebook's kernel${again}: each cell you run now shows its tensors' shapes (trace in ${where}).`,
  };
}

function joinPath(dir: string, name: string): string {
  const separator = dir.includes("\\") && !dir.includes("/") ? "\\" : "/";
  return dir.endsWith(separator) ? dir + name : dir + separator + name;
}
