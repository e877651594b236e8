// Pure logic of the module tree view (no vscode import, so unit tests run in plain Node):
// the server's `shapelens.modules` entries as a tree, and the text of each row.

export interface Slot {
  text: string; // server-formatted: "(1‥8,64,64) f32 cpu"
  shape: number[] | null;
  dim_ranges: [number, number][] | null;
  dtype: string | null;
  device: string | null;
}

export interface SourceLocation {
  file: string; // absolute path
  line: number; // 1-based
}

export interface ModuleEntry {
  path: string; // "" for a root; "transformer.h.0.attn" below it
  class: string;
  params: number;
  trainable_params: number;
  calls: number;
  calls_sampled?: boolean; // calls partly estimated (the tree stopped watching while nothing changed)
  inputs: Slot[];
  outputs: Slot[];
  declared: SourceLocation | null;
  forward: SourceLocation | null;
  rank: number | null;
  summary: string; // server-formatted: "4.2k params · (4,64,64) → (4,64,65) ×22"
}

export interface ModuleNode {
  id: string; // unique in one reply and stable across runs of the same program (keeps expansion)
  entry: ModuleEntry;
  relativePath: string; // the path below its parent: "attn", or "h.0.attn" when "h.0" is missing
  isRoot: boolean;
  children: ModuleNode[];
}

export interface SlotRow {
  id: string;
  direction: "in" | "out";
  label: string; // "in", "out"; "in[1]" when a module takes several tensors
  text: string;
}

export interface ModuleRow {
  label: string;
  description: string;
  tooltip: string;
  contextValue: string; // "module", then " declared" / " forward" for what can be opened
}

/** The entries of a `shapelens.modules` reply; [] for anything else (an older server's null). */
export function modulesOf(reply: unknown): ModuleEntry[] {
  const modules = (reply as { modules?: unknown } | null | undefined)?.modules;
  return Array.isArray(modules) ? modules.filter(isEntry) : [];
}

function isEntry(value: unknown): value is ModuleEntry {
  const entry = value as Partial<ModuleEntry> | null;
  return !!entry && typeof entry.path === "string" && typeof entry.class === "string";
}

/**
 * The trees of pre-ordered entries: each root (path "") starts a tree; a module's parent is the
 * entry of the same root with the longest proper dot-prefix of its path, else the root.
 */
export function buildModuleTree(entries: readonly ModuleEntry[]): ModuleNode[] {
  const roots: ModuleNode[] = [];
  let byPath = new Map<string, ModuleNode>();
  let root: ModuleNode | undefined;
  const used = new Set<string>();
  const uniqueId = (base: string): string => {
    let id = base;
    for (let n = 2; used.has(id); n++) {
      id = `${base}#${n}`;
    }
    used.add(id);
    return id;
  };
  for (const entry of entries) {
    if (entry.path === "" || !root) {
      // An entry before any root cannot be placed: it becomes a root of its own.
      root = { id: uniqueId(`${roots.length}:${entry.path}`), entry, relativePath: entry.path, isRoot: true, children: [] };
      roots.push(root);
      byPath = new Map([[entry.path, root]]);
      continue;
    }
    const parent = parentOf(entry.path, byPath) ?? root;
    const prefix = parent.entry.path;
    const relativePath = prefix && entry.path.startsWith(`${prefix}.`) ? entry.path.slice(prefix.length + 1) : entry.path;
    const node: ModuleNode = { id: uniqueId(`${roots.length - 1}:${entry.path}`), entry, relativePath, isRoot: false, children: [] };
    parent.children.push(node);
    if (!byPath.has(entry.path)) {
      byPath.set(entry.path, node);
    }
  }
  return roots;
}

function parentOf(path: string, byPath: ReadonlyMap<string, ModuleNode>): ModuleNode | undefined {
  const parts = path.split(".");
  for (let length = parts.length - 1; length > 0; length--) {
    const parent = byPath.get(parts.slice(0, length).join("."));
    if (parent) {
      return parent;
    }
  }
  return undefined;
}

/** A module's row: a root by its class, a descendant by its path below its parent. */
export function moduleRow(node: ModuleNode): ModuleRow {
  const { entry } = node;
  const rank = rankOf(entry);
  const details = node.isRoot ? [rank !== undefined ? `rank ${rank}` : "", entry.summary] : [entry.class, entry.summary];
  return {
    label: node.isRoot ? entry.class : node.relativePath,
    description: details.filter(Boolean).join(" · "),
    tooltip: [
      `${entry.path || "(root)"}: ${entry.class}${rank !== undefined ? ` on rank ${rank}` : ""}`,
      `${entry.params} params (${entry.trainable_params} trainable); ${callsText(entry)}`,
      entry.declared ? `declared at ${entry.declared.file}:${entry.declared.line}` : "",
      entry.forward ? `forward at ${entry.forward.file}:${entry.forward.line}` : "",
    ]
      .filter(Boolean)
      .join("\n"),
    contextValue: ["module", entry.declared ? "declared" : "", entry.forward ? "forward" : ""].filter(Boolean).join(" "),
  };
}

/** How often forward ran; an estimate says so and how it was made. */
export function callsText(entry: ModuleEntry): string {
  if (entry.calls_sampled) {
    return (
      `forward ran about ${entry.calls} times (estimated: once its shapes had stayed the same, ` +
      "its calls were counted from how often the user code that calls it ran)"
    );
  }
  return `forward ran ${entry.calls === 1 ? "once" : `${entry.calls} times`}`;
}

function rankOf(entry: ModuleEntry): number | undefined {
  return typeof entry.rank === "number" ? entry.rank : undefined; // null outside distributed runs
}

/** The leaf rows of a module's tensors: inputs, then outputs, numbered when there are several. */
export function slotRows(node: ModuleNode): SlotRow[] {
  const rows = (direction: "in" | "out", slots: readonly Slot[]): SlotRow[] =>
    slots.map((slot, index) => ({
      id: `${node.id}/${direction}${index}`,
      direction,
      label: slots.length > 1 ? `${direction}[${index}]` : direction,
      text: slot.text,
    }));
  return [...rows("in", node.entry.inputs ?? []), ...rows("out", node.entry.outputs ?? [])];
}

export interface EditorTarget {
  file: string;
  line: number; // 0-based
}

/** Where a module opens: its declaration, else its class's forward (`"forward"`: the forward only). */
export function openTarget(entry: ModuleEntry, what: "declaration" | "forward"): EditorTarget | undefined {
  const location = what === "forward" ? entry.forward : (entry.declared ?? entry.forward);
  return location ? { file: location.file, line: Math.max(0, location.line - 1) } : undefined;
}
