import { describe, expect, it } from "vitest";
import {
  CELL_SCHEME,
  collectKernelOutputs,
  DOCUMENT_SELECTOR,
  ERROR_MIME,
  KERNEL_TRACE_GLOB,
  kernelSetupCode,
  manualLines,
  manualMessage,
  pythonString,
  readKernelOutcome,
  REPORT_MARKER,
} from "../../src/notebook";

const LIBS = "/home/me/.vscode/extensions/shapelens.shapelens-0.1.0/vscode-extension/bundled/libs";

describe("DOCUMENT_SELECTOR", () => {
  it("serves Python files on disk and the Python cells of any notebook", () => {
    expect(DOCUMENT_SELECTOR).toContainEqual({ scheme: "file", language: "python" });
    expect(DOCUMENT_SELECTOR).toContainEqual({ notebook: "*", language: "python" });
    expect(DOCUMENT_SELECTOR).toContainEqual({ scheme: "vscode-notebook-cell", language: "python" });
    expect(CELL_SCHEME).toBe("vscode-notebook-cell");
  });

  it("serves no other language", () => {
    expect(DOCUMENT_SELECTOR.every((filter) => filter.language === "python")).toBe(true);
  });
});

describe("KERNEL_TRACE_GLOB", () => {
  it("names the files a kernel writes in any .shapelens folder", () => {
    expect(KERNEL_TRACE_GLOB).toBe("**/.shapelens/kernel-*.json");
  });
});

describe("pythonString", () => {
  it("writes a literal Python reads back as the same text", () => {
    expect(pythonString("/a/b")).toBe('"/a/b"');
    expect(pythonString('C:\\Users\\me\\"x"')).toBe('"C:\\\\Users\\\\me\\\\\\"x\\""');
  });
});

describe("kernelSetupCode", () => {
  const code = kernelSetupCode(LIBS);

  it("appends the bundled libraries only when the kernel has no shapelens of its own", () => {
    const lines = code.split("\n");
    expect(lines[1]).toBe(`if _sl_util.find_spec("shapelens") is None and "${LIBS}" not in _sl_sys.path:`);
    expect(lines[2]).toBe(`    _sl_sys.path.append("${LIBS}")`);
    expect(code).not.toContain("sys.path.insert");
  });

  it("loads the IPython extension and prints one report line", () => {
    expect(code).toContain('get_ipython().extension_manager.load_extension("shapelens")');
    expect(code).toContain(`print("${REPORT_MARKER}" + _sl_json.dumps({`);
  });

  it("leaves no name of its own in the user's namespace", () => {
    const bound = new Set([...code.matchAll(/\b(_sl_[a-z]+)\b/g)].map((match) => match[1]));
    const deleted = /^del (.*)$/m.exec(code)?.[1].split(/,\s*/) ?? [];
    expect(new Set(deleted)).toEqual(bound);
  });
});

describe("manual instructions", () => {
  it("are the sys.path line with the real bundled path, then %load_ext", () => {
    expect(manualLines(LIBS)).toEqual([`import sys; sys.path.append("${LIBS}")`, "%load_ext shapelens"]);
  });

  it("say why, and both lines, in one notification", () => {
    const message = manualMessage(LIBS, "no Jupyter extension (ms-toolsai.jupyter) to reach the kernel.");
    expect(message).toBe(
      "ShapeLens: no Jupyter extension (ms-toolsai.jupyter) to reach the kernel. " +
        `To trace this notebook's kernel, run in a cell: import sys; sys.path.append("${LIBS}") then %load_ext shapelens`,
    );
  });
});

describe("readKernelOutcome", () => {
  const report = (fields: Record<string, unknown>) =>
    `${REPORT_MARKER}${JSON.stringify({ result: "loaded", module: "/x/shapelens/__init__.py", cwd: "/work/nb", trace_dir: null, ...fields })}\n`;

  it("is success when the extension loaded, naming where the trace goes", () => {
    const outcome = readKernelOutcome(`some output\n${report({})}`, []);
    expect(outcome.ok).toBe(true);
    expect(outcome.message).toContain("/work/nb/.shapelens");
    expect(outcome.message).not.toContain("already");
  });

  it("is success when it was loaded before, and names SHAPELENS_TRACE_DIR when set", () => {
    const outcome = readKernelOutcome(report({ result: "already loaded", trace_dir: "/tmp/traces" }), []);
    expect(outcome).toMatchObject({ ok: true });
    expect(outcome.message).toContain("(it already did)");
    expect(outcome.message).toContain("/tmp/traces");
  });

  it("is failure on an error, on a shapelens without the IPython extension, and on no report", () => {
    expect(readKernelOutcome("", ["ModuleNotFoundError: No module named 'shapelens'"])).toEqual({
      ok: false,
      message: "the kernel could not load ShapeLens: ModuleNotFoundError: No module named 'shapelens'",
    });
    const old = readKernelOutcome(report({ result: "no load function" }), []);
    expect(old.ok).toBe(false);
    expect(old.message).toContain("too old");
    expect(readKernelOutcome("hello\n", [])).toEqual({ ok: false, message: "the kernel gave no answer: hello" });
    expect(readKernelOutcome(`${REPORT_MARKER}{not json\n`, []).ok).toBe(false);
  });
});

describe("collectKernelOutputs", () => {
  const item = (mime: string, text: string) => ({ mime, data: new TextEncoder().encode(text) });
  async function* outputs(...batches: { mime: string; data: Uint8Array }[][]) {
    for (const items of batches) {
      yield { items };
    }
  }

  it("gathers stdout, sends stderr to the log, and reads the report", async () => {
    const warnings: string[] = [];
    const collected = await collectKernelOutputs(
      outputs(
        [item("application/vnd.code.notebook.stdout", "ShapeLens: tracing every cell\n")],
        [item("application/vnd.code.notebook.stderr", "a warning\n")],
        [item("application/vnd.code.notebook.stdout", `${REPORT_MARKER}{"result": "loaded", "module": null, "cwd": "/nb", "trace_dir": null}\n`)],
      ),
      (text) => warnings.push(text),
    );
    expect(collected.errors).toEqual([]);
    expect(warnings).toEqual(["a warning"]);
    expect(readKernelOutcome(collected.stdout, collected.errors)).toMatchObject({ ok: true });
  });

  it("turns an error output and a failing iteration into errors", async () => {
    const error = item(ERROR_MIME, JSON.stringify({ name: "ModuleNotFoundError", message: "No module named 'shapelens'", stack: "…" }));
    expect((await collectKernelOutputs(outputs([error]), () => undefined)).errors).toEqual([
      "ModuleNotFoundError: No module named 'shapelens'",
    ]);
    async function* dies(): AsyncIterable<{ items: { mime: string; data: Uint8Array }[] }> {
      yield { items: [item("text/plain", "partial")] };
      throw new Error("kernel died");
    }
    expect(await collectKernelOutputs(dies(), () => undefined)).toEqual({ stdout: "partial", errors: ["kernel died"] });
  });
});
