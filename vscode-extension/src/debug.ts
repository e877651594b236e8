// Debugging: the `shapelens` debug type (debugpy in the traced child, attached over
// 127.0.0.1) and tensor-aware inline values for any debugpy session.
import * as vscode from "vscode";
import { DebugEndpoint, ShapeLensClient } from "./client";
import { DecorationController } from "./decorations";
import { moduleFile, readLaunch } from "./launches";
import { parseHelperResult, placeInlineValues } from "./inlineValues";

const DEBUGPY_TYPES = new Set(["shapelens", "debugpy", "python"]);
const ATTACH_TIMEOUT_MS = 60_000;
const LIVE_HINT_WAIT_MS = 1_500; // a paused run's next flush is due within 0.25 s
const RESUMING_REQUESTS = new Set(["continue", "next", "stepIn", "stepOut", "stepBack", "reverseContinue", "goto"]);

type DebugListening = DebugEndpoint;

export class DebugIntegration implements vscode.Disposable {
  private readonly waiting = new Map<string, (where: DebugListening) => void>();
  private expression: Promise<string | undefined> | undefined;
  private readonly subscriptions: vscode.Disposable[];
  private readonly inlineValuesChanged = new vscode.EventEmitter<void>();
  /** Asks VS Code for the inline values again: a live hint that arrives while paused owns its line. */
  readonly onDidChangeInlineValues = this.inlineValuesChanged.event;

  constructor(
    private readonly client: ShapeLensClient,
    private readonly output: vscode.LogOutputChannel,
    private readonly decorations: DecorationController,
  ) {
    this.subscriptions = [
      this.inlineValuesChanged,
      decorations.onDidApply(() => {
        if (vscode.debug.activeDebugSession?.type === "shapelens") {
          this.inlineValuesChanged.fire();
        }
      }),
      // Inline values hide the hints of their lines only while paused: any resume shows them again.
      vscode.debug.registerDebugAdapterTrackerFactory("*", {
        createDebugAdapterTracker: () => ({
          onWillReceiveMessage: (message: { command?: string }) => {
            if (message.command && RESUMING_REQUESTS.has(message.command)) {
              this.decorations.showAllLines();
            }
          },
          onDidSendMessage: (message: { type?: string; event?: string }) => {
            if (message.type === "event" && (message.event === "continued" || message.event === "terminated")) {
              this.decorations.showAllLines();
            }
          },
          onWillStopSession: () => this.decorations.showAllLines(),
        }),
      }),
      vscode.debug.registerDebugConfigurationProvider("shapelens", this),
      vscode.debug.registerDebugAdapterDescriptorFactory("shapelens", this),
      vscode.languages.registerInlineValuesProvider({ language: "python" }, this),
      vscode.commands.registerCommand("shapelens.debugFile", (uri?: vscode.Uri) => this.debugFile(uri)),
      // Attached sessions only "disconnect": stopping the debugger must stop the program too.
      vscode.debug.onDidTerminateDebugSession((session) => {
        const program = session.configuration.program as string | undefined;
        if (session.type === "shapelens" && program) {
          void this.client
            .executeCommand("shapelens.cancel", { uri: vscode.Uri.file(program).toString() })
            .catch(() => undefined);
        }
      }),
    ];
  }

  /** Called by the client on `shapelens/debugListening`. */
  listening(where: DebugListening): void {
    this.waiting.get(where.uri)?.(where);
    this.waiting.delete(where.uri);
  }

  async debugFile(uri?: vscode.Uri): Promise<boolean> {
    const target = uri ?? vscode.window.activeTextEditor?.document.uri;
    if (!target) {
      return false;
    }
    if (target.scheme !== "file") {
      // A notebook cell's fsPath is its notebook's: never run an .ipynb as a script.
      void vscode.window.showWarningMessage("ShapeLens: open a Python file on disk to debug it.");
      return false;
    }
    const document = await vscode.workspace.openTextDocument(target);
    if (document.isDirty) {
      await document.save();
    }
    return vscode.debug.startDebugging(vscode.workspace.getWorkspaceFolder(target), {
      type: "shapelens",
      request: "launch",
      name: "ShapeLens: Debug File",
      program: target.fsPath,
    });
  }

  // -- DebugConfigurationProvider ----------------------------------------------------------
  async resolveDebugConfigurationWithSubstitutedVariables(
    folder: vscode.WorkspaceFolder | undefined,
    config: vscode.DebugConfiguration,
  ): Promise<vscode.DebugConfiguration | undefined> {
    if (config.request !== "launch") {
      return config;
    }
    if (!vscode.workspace.isTrusted) {
      void vscode.window.showWarningMessage("ShapeLens runs your code, so it only works in a trusted workspace.");
      return undefined;
    }
    const launch = await readLaunch(
      { ...config, ...(config.program || config.module ? {} : { program: vscode.window.activeTextEditor?.document.uri.fsPath }) },
      folder ?? (config.program ? vscode.workspace.getWorkspaceFolder(vscode.Uri.file(config.program)) : undefined),
    );
    if (!launch) {
      return undefined; // readLaunch said what is wrong
    }
    if (config.noDebug) {
      // Run Without Debugging (Ctrl+F5): the run traced, with hints, and no debugger.
      void vscode.commands.executeCommand("shapelens.runLaunch", launch, config.name);
      return undefined;
    }
    if (launch.nprocPerNode) {
      void vscode.window.showErrorMessage(
        "ShapeLens: a run on several processes cannot be debugged; run it without debugging (Ctrl+F5).",
      );
      return undefined;
    }
    const program = launch.program ?? (await moduleFile(launch.module ?? "", launch.cwd))?.fsPath;
    if (!program) {
      void vscode.window.showErrorMessage(`ShapeLens: cannot find the file of module ${launch.module ?? ""}.`);
      return undefined;
    }
    const uri = vscode.Uri.file(program).toString();
    const listening = new Promise<DebugListening>((resolve, reject) => {
      this.waiting.set(uri, resolve);
      setTimeout(() => reject(new Error("debugpy did not start in time")), ATTACH_TIMEOUT_MS);
    });
    // The run resolves when the program ends; the debugger attaches as soon as debugpy listens.
    this.client
      .executeCommand("shapelens.run", {
        uri,
        args: launch.args,
        cwd: launch.cwd,
        env: launch.env,
        ...(launch.module ? { module: launch.module } : {}),
        debug: true,
        progress: false,
        clientAttaches: true,
      })
      .then((summary) => this.output.info(`debug run ended: ${JSON.stringify(summary)}`))
      .catch((error: unknown) => this.output.error(`debug run failed: ${String(error)}`));
    try {
      const where = await listening;
      return {
        ...config,
        program, // the file whose run a stop of this session cancels
        request: "attach",
        connect: { host: where.host, port: where.port },
        justMyCode: config.justMyCode ?? true,
        // The runner's frames under the user's code are not the user's: keep them out of
        // the call stack and of stepping.
        rules: [...(config.rules ?? []), ...(where.hide ?? []).map((path) => ({ path: `${path}/**`, include: false }))],
      };
    } catch (error) {
      void vscode.window.showErrorMessage(`ShapeLens: ${error instanceof Error ? error.message : String(error)}`);
      return undefined;
    } finally {
      this.waiting.delete(uri);
    }
  }

  // -- DebugAdapterDescriptorFactory: debugpy's own adapter, already listening -------------
  createDebugAdapterDescriptor(session: vscode.DebugSession): vscode.DebugAdapterDescriptor | undefined {
    const connect = session.configuration.connect as { host: string; port: number } | undefined;
    if (!connect) {
      void vscode.window.showErrorMessage("ShapeLens: this debug configuration has no debugpy endpoint.");
      return undefined;
    }
    return new vscode.DebugAdapterServer(connect.port, connect.host);
  }

  // -- InlineValuesProvider ------------------------------------------------------------------
  async provideInlineValues(
    document: vscode.TextDocument,
    viewPort: vscode.Range,
    context: vscode.InlineValueContext,
  ): Promise<vscode.InlineValue[]> {
    const session = vscode.debug.activeDebugSession;
    if (!session || !DEBUGPY_TYPES.has(session.type)) {
      return [];
    }
    const expression = await this.helperExpression();
    if (!expression) {
      return []; // no helper: fall back silently to VS Code's own inline values
    }
    try {
      const reply = (await session.customRequest("evaluate", {
        expression,
        frameId: context.frameId,
        context: "watch",
      })) as { result?: string };
      const values = parseHelperResult(reply.result ?? "");
      const lines = Array.from({ length: document.lineCount }, (_, i) => document.lineAt(i).text);
      let placed = placeInlineValues(values, lines, viewPort.start.line, context.stoppedLocation.end.line);
      // One text per line. A ShapeLens session's hints are live (this run's, with its findings):
      // they keep their lines. Another session's hints are an earlier run's: its values win.
      const uri = document.uri.toString();
      if (session.type === "shapelens") {
        // The live hints of the lines run so far come with the run's next flush (≤ 0.25 s):
        // a value on a line without its hint yet waits for it rather than showing beside it.
        const hinted = () => new Set(this.decorations.hintsFor(uri).map((hint) => hint.line));
        if (placed.some((value) => !hinted().has(value.line))) {
          await this.nextHints(LIVE_HINT_WAIT_MS);
        }
        const lines = hinted();
        placed = placed.filter((value) => !lines.has(value.line));
      } else {
        this.decorations.hideLines(uri, new Set(placed.map((value) => value.line)));
      }
      return placed.map((value) => {
        const end = document.lineAt(value.line).range.end;
        return new vscode.InlineValueText(new vscode.Range(end, end), `${value.name}: ${value.label}`);
      });
    } catch {
      return [];
    }
  }

  /** Resolves when decorations are next applied, or after `timeoutMs`. */
  private nextHints(timeoutMs: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, timeoutMs);
      const listener = this.decorations.onDidApply(done);
      function done(): void {
        clearTimeout(timer);
        listener.dispose();
        resolve();
      }
    });
  }

  private helperExpression(): Promise<string | undefined> {
    this.expression ??= this.client
      .executeCommand("shapelens.inlineValueExpression", {})
      .then((value) => (typeof value === "string" ? value : undefined))
      .catch(() => undefined);
    return this.expression;
  }

  dispose(): void {
    for (const subscription of this.subscriptions) {
      subscription.dispose();
    }
  }
}

