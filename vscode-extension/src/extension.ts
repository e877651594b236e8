// Wiring only: each concern lives in its own module.
import * as vscode from "vscode";
import { ShapeLensClient } from "./client";
import { registerCommands } from "./commands";
import { DebugIntegration } from "./debug";
import { DecorationController } from "./decorations";
import { ModuleView } from "./moduleView";
import { registerNotebookCommands } from "./notebookKernel";
import { resolveInterpreter } from "./python";
import { readSettings, serverCommand, Settings } from "./settings";
import { RunStatusBar } from "./statusBar";

let client: ShapeLensClient | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const output = vscode.window.createOutputChannel("ShapeLens", { log: true });
  const load = (): Settings => {
    const section = vscode.workspace.getConfiguration("shapelens");
    const { settings, problems } = readSettings((key) => {
      const inspected = section.inspect(key);
      return inspected?.workspaceFolderValue ?? inspected?.workspaceValue ?? inspected?.globalValue;
    });
    if (problems.length) {
      void vscode.window.showWarningMessage(`ShapeLens settings: ${problems.join("; ")}`);
    }
    return settings;
  };
  let settings = load();
  let interpreter = await resolveInterpreter(settings.interpreter, vscode.window.activeTextEditor?.document.uri);
  output.info(`interpreter: ${interpreter.path} (from ${interpreter.source})`);

  const decorations = new DecorationController();
  decorations.configure(settings.displayMode === "decorations", settings.maxHintLength);
  const status = new RunStatusBar();
  client = new ShapeLensClient(
    context.asAbsolutePath("vscode-extension/python/launch_server.py"),
    output,
    decorations,
    () => ({ settings, interpreter: interpreter.path }),
  );
  const debugging = new DebugIntegration(client, output, decorations);
  client.onDebugListening = (where) => debugging.listening(where);
  const modules = new ModuleView(client, output);
  context.subscriptions.push(
    output,
    debugging,
    modules,
    client.onDidChangeResults((uri) => modules.show(uri)),
    decorations,
    status,
    client,
    ...registerCommands({ client, decorations, status, output, settings: () => settings }),
    // The libraries launch_server.py puts on sys.path: a kernel without shapelens gets them too.
    ...registerNotebookCommands(context.asAbsolutePath("vscode-extension/bundled/libs"), output),
    vscode.workspace.onDidChangeConfiguration(async (event) => {
      if (!event.affectsConfiguration("shapelens")) {
        return;
      }
      const previous = serverCommand(settings, interpreter.path) + "\0" + interpreter.path;
      settings = load();
      interpreter = await resolveInterpreter(settings.interpreter, vscode.window.activeTextEditor?.document.uri);
      decorations.configure(settings.displayMode === "decorations", settings.maxHintLength);
      if (serverCommand(settings, interpreter.path) + "\0" + interpreter.path !== previous) {
        output.info(`interpreter changed to ${interpreter.path}: restarting the server`);
        await client?.restart();
      } else {
        client?.notifySettings();
      }
    }),
  );
  try {
    await client.start();
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    const server = serverCommand(settings, interpreter.path);
    output.error(`cannot start the language server with ${server}: ${message}`);
    void vscode.window.showErrorMessage(
      `ShapeLens could not start its server with ${server}: it needs Python 3.11+. ` +
        `Set "shapelens.serverInterpreter" to a Python 3.11+ (your code keeps running in ${interpreter.path}; ` +
        `it may be 3.10), or "shapelens.interpreter" to a 3.11+.`,
    );
  }
}

export async function deactivate(): Promise<void> {
  await client?.stop();
}
