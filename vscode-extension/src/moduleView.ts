// The Explorer's "ShapeLens" view: the nn.Modules of the last run (`shapelens.modules`),
// each with its tensors in and out; a row opens where the module was declared.
import * as path from "path";
import * as vscode from "vscode";
import { ShapeLensClient } from "./client";
import { buildModuleTree, ModuleNode, moduleRow, modulesOf, openTarget, SlotRow, slotRows } from "./moduleTree";

export const MODULES_VIEW = "shapelens.modules";

type Row = { kind: "module"; node: ModuleNode } | { kind: "slot"; slot: SlotRow };

export class ModuleView implements vscode.TreeDataProvider<Row>, vscode.Disposable {
  private target: string | undefined; // a URI of the last run's script
  private requests = 0; // only the latest request's answer is shown
  private warned = false;
  private readonly changed = new vscode.EventEmitter<Row | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  private readonly view: vscode.TreeView<Row>;
  private readonly subscriptions: vscode.Disposable[];

  constructor(
    private readonly client: ShapeLensClient,
    private readonly output: vscode.LogOutputChannel,
  ) {
    this.view = vscode.window.createTreeView(MODULES_VIEW, { treeDataProvider: this, showCollapseAll: true });
    this.subscriptions = [
      this.view,
      this.changed,
      vscode.commands.registerCommand("shapelens.modules.refresh", () => this.changed.fire(undefined)),
      vscode.commands.registerCommand("shapelens.modules.openDeclaration", (row?: Row) => this.open(row, "declaration")),
      vscode.commands.registerCommand("shapelens.modules.openForward", (row?: Row) => this.open(row, "forward")),
    ];
  }

  /** Shows the modules of the run of `uri` (a file it ran); undefined: no run, an empty view. */
  show(uri: string | undefined): void {
    this.target = uri;
    this.view.description = uri ? path.basename(vscode.Uri.parse(uri).fsPath) : undefined;
    this.changed.fire(undefined);
  }

  // Fetched when VS Code asks (the view is visible), not on every run while it is hidden.
  async getChildren(row?: Row): Promise<Row[]> {
    if (row) {
      return row.kind === "module"
        ? [
            ...slotRows(row.node).map((slot): Row => ({ kind: "slot", slot })),
            ...row.node.children.map((node): Row => ({ kind: "module", node })),
          ]
        : [];
    }
    const target = this.target;
    this.view.message = undefined;
    if (!target) {
      return [];
    }
    const request = ++this.requests;
    let reply: unknown;
    try {
      reply = await this.client.executeCommand("shapelens.modules", { uri: target });
    } catch (error) {
      // An older server has no `shapelens.modules`: say so once, in the log, not in a pop-up.
      if (!this.warned) {
        this.warned = true;
        this.output.warn(`modules of ${target}: ${error instanceof Error ? error.message : String(error)}`);
      }
      return [];
    }
    if (request !== this.requests || target !== this.target) {
      return []; // a newer request replaces this one
    }
    const roots = buildModuleTree(modulesOf(reply));
    if (roots.length === 0) {
      this.view.message = "No nn.Module ran in the last run.";
    }
    return roots.map((node): Row => ({ kind: "module", node }));
  }

  getTreeItem(row: Row): vscode.TreeItem {
    if (row.kind === "slot") {
      const item = new vscode.TreeItem(row.slot.label, vscode.TreeItemCollapsibleState.None);
      item.id = row.slot.id;
      item.description = row.slot.text;
      item.iconPath = new vscode.ThemeIcon(row.slot.direction === "in" ? "sign-in" : "sign-out");
      return item;
    }
    const { node } = row;
    const text = moduleRow(node);
    const hasChildren = node.children.length > 0 || slotRows(node).length > 0;
    const item = new vscode.TreeItem(
      text.label,
      !hasChildren
        ? vscode.TreeItemCollapsibleState.None
        : node.isRoot
          ? vscode.TreeItemCollapsibleState.Expanded
          : vscode.TreeItemCollapsibleState.Collapsed,
    );
    item.id = node.id;
    item.description = text.description;
    item.tooltip = text.tooltip;
    item.contextValue = text.contextValue;
    item.iconPath = new vscode.ThemeIcon("symbol-class");
    if (openTarget(node.entry, "declaration")) {
      item.command = { command: "shapelens.modules.openDeclaration", title: "Open Declaration", arguments: [row] };
    }
    return item;
  }

  private async open(row: Row | undefined, what: "declaration" | "forward"): Promise<void> {
    const target = row?.kind === "module" ? openTarget(row.node.entry, what) : undefined;
    if (!target) {
      return;
    }
    const position = new vscode.Position(target.line, 0);
    await vscode.window.showTextDocument(vscode.Uri.file(target.file), {
      selection: new vscode.Range(position, position),
      preview: true,
    });
  }

  dispose(): void {
    for (const subscription of this.subscriptions) {
      subscription.dispose();
    }
  }
}
