// End-of-line decorations (error-lens style) drawn from `shapelens/traceUpdated`.
import * as vscode from "vscode";
import { applyEdits, buildHints, Hint, HintTone, LineEdit, TraceUpdate } from "./hints";

const COLORS: Record<HintTone, string> = {
  hint: "shapelens.hintForeground",
  warning: "shapelens.warningForeground",
  error: "shapelens.errorForeground",
};

/**
 * A URI string as `vscode.Uri.toString()` writes it, the form editors' documents are compared in.
 * The server may spell one differently: a notebook cell's fragment unescaped (`#W0sZmlsZQ==`
 * for `#W0sZmlsZQ%3D%3D`), a drive letter's colon escaped or not.
 */
function canonical(uri: string): string {
  try {
    return vscode.Uri.parse(uri, true).toString();
  } catch {
    return uri;
  }
}

export class DecorationController implements vscode.Disposable {
  private types = new Map<HintTone, vscode.TextEditorDecorationType>();
  private hints = new Map<string, Hint[]>(); // by document URI
  private hidden = new Map<string, Set<number>>(); // lines a paused debugger's inline values own
  private enabled = true;
  private maxLength = 80;
  private readonly subscriptions: vscode.Disposable[] = [];
  private readonly applied = new vscode.EventEmitter<string>();
  /** Fires with a document's URI when its hints changed (a run's update arrived). */
  readonly onDidApply = this.applied.event;

  constructor() {
    this.createTypes();
    this.subscriptions.push(
      vscode.window.onDidChangeVisibleTextEditors(() => this.renderAll()),
      vscode.workspace.onDidChangeTextDocument((event) => this.onEdit(event)),
    );
  }

  /** Decoration types are created once per configuration, not per update. */
  configure(enabled: boolean, maxLength: number): void {
    this.enabled = enabled;
    this.maxLength = maxLength;
    this.renderAll();
  }

  apply(update: TraceUpdate): void {
    const uri = canonical(update.uri);
    const document = vscode.workspace.textDocuments.find((d) => d.uri.toString() === uri);
    if (document && update.version !== null && document.version !== update.version) {
      return; // stale: the server will send the update for the current version
    }
    this.hints.set(uri, buildHints(update.lines, this.maxLength));
    this.render(uri);
    this.applied.fire(uri);
  }

  clear(): void {
    this.hints.clear();
    this.renderAll();
  }

  hintsFor(uri: string): readonly Hint[] {
    return this.hints.get(canonical(uri)) ?? [];
  }

  /** While a debugger is paused, its inline values own these lines: one text per line. */
  hideLines(uri: string, lines: ReadonlySet<number>): void {
    this.hidden.set(canonical(uri), new Set(lines));
    this.render(canonical(uri));
  }

  /** The debugger resumed or stopped: every hint shows again. */
  showAllLines(): void {
    const uris = [...this.hidden.keys()];
    this.hidden.clear();
    uris.forEach((uri) => this.render(uri));
  }

  private onEdit(event: vscode.TextDocumentChangeEvent): void {
    const uri = event.document.uri.toString();
    const current = this.hints.get(uri);
    if (!current || event.contentChanges.length === 0) {
      return;
    }
    const edits: LineEdit[] = event.contentChanges.map((change) => ({
      startLine: change.range.start.line,
      endLine: change.range.end.line,
      insertedLines: (change.text.match(/\n/g) ?? []).length,
    }));
    this.hints.set(uri, applyEdits(current, edits));
    this.render(uri);
  }

  private renderAll(): void {
    const uris = new Set(vscode.window.visibleTextEditors.map((e) => e.document.uri.toString()));
    for (const uri of uris) {
      this.render(uri);
    }
  }

  private render(uri: string): void {
    const hidden = this.hidden.get(uri);
    const hints = this.enabled ? (this.hints.get(uri) ?? []).filter((hint) => !hidden?.has(hint.line)) : [];
    for (const editor of vscode.window.visibleTextEditors) {
      if (editor.document.uri.toString() !== uri) {
        continue;
      }
      for (const [tone, type] of this.types) {
        const options = hints
          .filter((hint) => hint.tone === tone && hint.line < editor.document.lineCount)
          .map((hint) => {
            const end = editor.document.lineAt(hint.line).range.end;
            return {
              range: new vscode.Range(end, end),
              renderOptions: { after: { contentText: hint.text } },
            };
          });
        editor.setDecorations(type, options);
      }
    }
  }

  private createTypes(): void {
    for (const tone of Object.keys(COLORS) as HintTone[]) {
      this.types.set(
        tone,
        vscode.window.createTextEditorDecorationType({
          after: {
            color: new vscode.ThemeColor(COLORS[tone]),
            margin: "0 0 0 3ch",
            fontStyle: "italic",
          },
          rangeBehavior: vscode.DecorationRangeBehavior.ClosedClosed,
        }),
      );
    }
  }

  dispose(): void {
    this.applied.dispose();
    for (const type of this.types.values()) {
      type.dispose();
    }
    for (const subscription of this.subscriptions) {
      subscription.dispose();
    }
  }
}
