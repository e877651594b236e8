// The language client: starts `shapelens lsp` (bundled libraries, user's interpreter).
import * as vscode from "vscode";
import {
  DidChangeConfigurationNotification,
  ExecuteCommandRequest,
  LanguageClient,
  LanguageClientOptions,
  ServerOptions,
} from "vscode-languageclient/node";
import { DecorationController } from "./decorations";
import { TraceUpdate } from "./hints";
import { CELL_SCHEME, DOCUMENT_SELECTOR, KERNEL_TRACE_GLOB } from "./notebook";
import { serverCommand, Settings, serverSettings } from "./settings";

export const TRACE_UPDATED = "shapelens/traceUpdated";
export const DEBUG_LISTENING = "shapelens/debugListening";
/** Commands that run a file: every run (Run File, a launch configuration, a debug run) ends in one. */
const RUN_COMMANDS = new Set(["shapelens.run", "shapelens.runFunction"]);

export interface DebugEndpoint {
  uri: string;
  host: string;
  port: number;
  hide?: string[]; // the runner's own code: not the user's
}

export interface ClientConfig {
  settings: Settings;
  interpreter: string;
}

export class ShapeLensClient implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private kernelTraces: vscode.FileSystemWatcher | undefined;
  private lastTraced: string | undefined; // the URI of the latest traceUpdated
  private readonly resultsChanged = new vscode.EventEmitter<string | undefined>();
  /** Fires when a run ended or a trace was loaded, with a URI of a file it ran; undefined when
   * every result is gone (Clear, a restart). */
  readonly onDidChangeResults = this.resultsChanged.event;
  /** Set by the debug integration: debugpy in a traced run is ready for a debugger. */
  onDebugListening: (where: DebugEndpoint) => void = () => undefined;

  constructor(
    private readonly launcher: string,
    private readonly output: vscode.LogOutputChannel,
    private readonly decorations: DecorationController,
    private readonly config: () => ClientConfig,
  ) {}

  async start(): Promise<void> {
    const { settings, interpreter } = this.config();
    // The server needs 3.11+; the user's code runs in `interpreter` (which may be 3.10).
    const serverOptions: ServerOptions = { command: serverCommand(settings, interpreter), args: [this.launcher] };
    // The server polls the folders where notebook kernels write their traces; a change VS Code
    // sees (under a workspace folder) is also sent at once, so the cells update without the wait.
    this.kernelTraces?.dispose();
    this.kernelTraces = vscode.workspace.createFileSystemWatcher(KERNEL_TRACE_GLOB);
    const clientOptions: LanguageClientOptions = {
      // Python files, and the Python cells of notebooks (the server places a kernel's trace on them).
      documentSelector: [...DOCUMENT_SELECTOR],
      synchronize: { fileEvents: this.kernelTraces },
      outputChannel: this.output,
      initializationOptions: serverSettings(settings, interpreter),
      middleware: {
        // In decorations mode the same hints are drawn as decorations: don't show them twice.
        provideInlayHints: (document, range, token, next) =>
          this.config().settings.displayMode === "inlayHints" ? next(document, range, token) : [],
        // Route the server's code lenses through our commands, which show progress with Cancel.
        provideCodeLenses: async (document, token, next) => {
          const lenses = (await next(document, token)) ?? [];
          if (document.uri.scheme === CELL_SCHEME) {
            // A cell is not a file to run: its kernel traces it ("Trace this Notebook's Kernel").
            return lenses.filter((lens) => !lens.command || !RUN_COMMANDS.has(lens.command.command));
          }
          for (const lens of lenses) {
            const argument = lens.command?.arguments?.[0] as { function?: string } | undefined;
            if (lens.command?.command === "shapelens.run") {
              lens.command = { ...lens.command, command: "shapelens.runFile", arguments: [document.uri] };
            } else if (lens.command?.command === "shapelens.runFunction" && argument?.function) {
              lens.command = {
                ...lens.command,
                command: "shapelens.runFunctionAt",
                arguments: [document.uri, argument.function],
              };
            }
          }
          return lenses;
        },
      },
    };
    const client = new LanguageClient("shapelens", "ShapeLens", serverOptions, clientOptions);
    client.onNotification(TRACE_UPDATED, (update: TraceUpdate) => {
      this.lastTraced = update.uri;
      this.decorations.apply(update);
    });
    client.onNotification(DEBUG_LISTENING, (where: DebugEndpoint) => this.onDebugListening(where));
    this.client = client;
    await client.start();
  }

  async restart(): Promise<void> {
    await this.stop();
    this.decorations.clear();
    this.resultsChanged.fire(undefined);
    await this.start();
  }

  async stop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    this.kernelTraces?.dispose();
    this.kernelTraces = undefined;
    if (client) {
      await client.stop();
    }
  }

  async executeCommand(command: string, argument: unknown): Promise<unknown> {
    if (!this.client) {
      throw new Error("the ShapeLens language server is not running");
    }
    const reply = this.client.sendRequest(ExecuteCommandRequest.type, { command, arguments: [argument] });
    this.announceResults(command, argument, reply);
    return reply;
  }

  /** The one place every run's end passes: a run's reply comes when its program ended. */
  private announceResults(command: string, argument: unknown, reply: Promise<unknown>): void {
    const uri = (argument as { uri?: unknown } | null | undefined)?.uri;
    if (RUN_COMMANDS.has(command) && typeof uri === "string") {
      const ended = () => this.resultsChanged.fire(uri); // a failed run may still have left results
      void reply.then(ended, ended);
    } else if (command === "shapelens.loadTrace") {
      // A trace names no script: its files' traceUpdated notifications come before the reply.
      this.lastTraced = undefined;
      void reply.then(() => this.resultsChanged.fire(this.lastTraced), () => undefined);
    } else if (command === "shapelens.clear" && uri === undefined) {
      void reply.then(() => this.resultsChanged.fire(undefined), () => undefined);
    }
  }

  notifySettings(): void {
    const { settings, interpreter } = this.config();
    void this.client?.sendNotification(DidChangeConfigurationNotification.type, {
      settings: serverSettings(settings, interpreter),
    });
  }

  dispose(): void {
    this.resultsChanged.dispose();
    void this.stop();
  }
}
