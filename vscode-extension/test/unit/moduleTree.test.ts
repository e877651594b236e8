import { describe, expect, it } from "vitest";
import { buildModuleTree, ModuleEntry, ModuleNode, moduleRow, modulesOf, openTarget, Slot, slotRows } from "../../src/moduleTree";

const slot = (text: string): Slot => ({ text, shape: null, dim_ranges: null, dtype: null, device: null });

const entry = (path: string, cls: string, extra: Partial<ModuleEntry> = {}): ModuleEntry => ({
  path,
  class: cls,
  params: 0,
  trainable_params: 0,
  calls: 1,
  inputs: [],
  outputs: [],
  declared: null,
  forward: null,
  rank: null,
  summary: "",
  ...extra,
});

/** The tree as nested [label, children] pairs, by each node's path below its parent. */
const shape = (nodes: ModuleNode[]): unknown[] =>
  nodes.map((node) => (node.children.length ? [node.relativePath || node.entry.class, shape(node.children)] : node.relativePath || node.entry.class));

describe("buildModuleTree", () => {
  it("nests descendants under the entry with their longest dot-prefix", () => {
    const roots = buildModuleTree([
      entry("", "GPT"),
      entry("transformer", "ModuleDict"),
      entry("transformer.h", "ModuleList"),
      entry("transformer.h.0", "Block"),
      entry("transformer.h.0.attn", "CausalSelfAttention"),
      entry("transformer.h.0.mlp", "MLP"),
      entry("transformer.h.1", "Block"),
      entry("lm_head", "Linear"),
    ]);
    expect(shape(roots)).toEqual([["GPT", [["transformer", [["h", [["0", ["attn", "mlp"]], "1"]]]], "lm_head"]]]);
    expect(roots[0].isRoot).toBe(true);
    expect(roots[0].children[0].isRoot).toBe(false);
  });

  it("starts a new tree at each root", () => {
    const roots = buildModuleTree([
      entry("", "Net"),
      entry("fc", "Linear"),
      entry("", "CrossEntropyLoss"),
      entry("fc", "Linear"), // the same path under another root is another module
    ]);
    expect(shape(roots)).toEqual([["Net", ["fc"]], ["CrossEntropyLoss", ["fc"]]]);
    const ids = [roots[0], roots[0].children[0], roots[1], roots[1].children[0]].map((node) => node.id);
    expect(new Set(ids).size).toBe(4);
  });

  it("attaches a module whose ancestors are missing to the nearest one present, else to the root", () => {
    const roots = buildModuleTree([
      entry("", "GPT"),
      entry("transformer", "ModuleDict"),
      entry("transformer.h.0.attn", "CausalSelfAttention"), // no transformer.h, no transformer.h.0
      entry("blocks.0.mlp", "MLP"), // no blocks, no blocks.0
    ]);
    expect(shape(roots)).toEqual([["GPT", [["transformer", ["h.0.attn"]], "blocks.0.mlp"]]]);
  });

  it("makes an entry before any root a root of its own", () => {
    const roots = buildModuleTree([entry("encoder", "Encoder"), entry("encoder.layer", "Linear")]);
    expect(roots).toHaveLength(1);
    expect(roots[0].children.map((node) => node.relativePath)).toEqual(["layer"]);
  });
});

describe("modulesOf", () => {
  it("reads the reply's modules, and nothing from anything else", () => {
    expect(modulesOf({ modules: [entry("", "Linear"), { path: 3 }] })).toEqual([entry("", "Linear")]);
    expect(modulesOf({ modules: [] })).toEqual([]);
    expect(modulesOf(null)).toEqual([]);
    expect(modulesOf({ status: "error" })).toEqual([]);
  });
});

describe("rows", () => {
  const [root] = buildModuleTree([
    entry("", "GPT", { summary: "85k params · (8,32) → (8,32,65)", rank: 1 }),
    entry("transformer", "ModuleDict"),
    entry("transformer.h.0.attn", "CausalSelfAttention", {
      summary: "4.2k params · (4,64,64) → (4,64,65) ×22",
      params: 4224,
      trainable_params: 4224,
      calls: 22,
      inputs: [slot("(4,64,64) f32 cpu")],
      outputs: [slot("(4,64,65) f32 cpu")],
      declared: { file: "/w/model.py", line: 55 },
      forward: { file: "/w/model.py", line: 60 },
    }),
    entry("loss", "Bilinear", { inputs: [slot("(4,3) f32 cpu"), slot("(4,5) f32 cpu")], outputs: [slot("(4,2) f32 cpu")] }),
  ]);
  const attn = root.children[0].children[0];
  const bilinear = root.children[1];

  it("labels a root by its class and a descendant by its path below its parent", () => {
    expect(moduleRow(root)).toMatchObject({ label: "GPT", description: "rank 1 · 85k params · (8,32) → (8,32,65)" });
    expect(moduleRow(attn)).toMatchObject({
      label: "h.0.attn",
      description: "CausalSelfAttention · 4.2k params · (4,64,64) → (4,64,65) ×22",
    });
    expect(moduleRow(root.children[0])).toMatchObject({ label: "transformer", description: "ModuleDict" });
  });

  it("says in the tooltip what the module is and where it comes from", () => {
    expect(moduleRow(attn).tooltip).toBe(
      [
        "transformer.h.0.attn: CausalSelfAttention",
        "4224 params (4224 trainable); forward ran 22 times",
        "declared at /w/model.py:55",
        "forward at /w/model.py:60",
      ].join("\n"),
    );
  });

  it("says when the calls are an estimate, and how they were estimated", () => {
    const estimated = { ...attn, entry: { ...attn.entry, calls: 4800, calls_sampled: true } };
    expect(moduleRow(estimated).tooltip.split("\n")[1]).toBe(
      "4224 params (4224 trainable); forward ran about 4800 times (estimated: once its shapes had stayed the same, " +
        "its calls were counted from how often the user code that calls it ran)",
    );
    expect(moduleRow({ ...attn, entry: { ...attn.entry, calls: 1 } }).tooltip).toContain("forward ran once");
  });

  it("gives one leaf per tensor in and out, numbered when there are several", () => {
    expect(slotRows(attn).map(({ label, text }) => [label, text])).toEqual([
      ["in", "(4,64,64) f32 cpu"],
      ["out", "(4,64,65) f32 cpu"],
    ]);
    expect(slotRows(bilinear).map(({ label, text }) => [label, text])).toEqual([
      ["in[0]", "(4,3) f32 cpu"],
      ["in[1]", "(4,5) f32 cpu"],
      ["out", "(4,2) f32 cpu"],
    ]);
    expect(new Set(slotRows(bilinear).map((row) => row.id)).size).toBe(3);
    expect(slotRows(root)).toEqual([]);
  });

  it("marks what a row can open in its context value", () => {
    expect(moduleRow(attn).contextValue).toBe("module declared forward");
    expect(moduleRow(root).contextValue).toBe("module");
  });
});

describe("openTarget", () => {
  const declared = { file: "/w/train.py", line: 10 };
  const forward = { file: "/venv/torch/nn/modules/linear.py", line: 124 };

  it("opens the declaration, 0-based", () => {
    expect(openTarget(entry("", "Linear", { declared, forward }), "declaration")).toEqual({ file: "/w/train.py", line: 9 });
  });

  it("falls back to the forward when the declaration is unknown", () => {
    expect(openTarget(entry("", "Linear", { forward }), "declaration")).toEqual({ file: forward.file, line: 123 });
  });

  it("opens the forward when asked, and nothing without a location", () => {
    expect(openTarget(entry("", "Linear", { declared, forward }), "forward")).toEqual({ file: forward.file, line: 123 });
    expect(openTarget(entry("", "Linear", { declared }), "forward")).toBeUndefined();
    expect(openTarget(entry("", "Linear"), "declaration")).toBeUndefined();
  });
});
