// Interpreter discovery through the Python extension's API, when it is installed.
import * as vscode from "vscode";
import { chooseInterpreter, InterpreterChoice } from "./interpreter";

export async function pythonExtensionInterpreter(resource: vscode.Uri | undefined): Promise<string | undefined> {
  if (!vscode.extensions.getExtension("ms-python.python")) {
    return undefined; // not a hard dependency
  }
  try {
    const { PythonExtension } = await import("@vscode/python-extension");
    const api = await PythonExtension.api();
    const environment = api.environments.getActiveEnvironmentPath(resource);
    const resolved = await api.environments.resolveEnvironment(environment);
    return resolved?.executable.uri?.fsPath ?? environment.path;
  } catch {
    return undefined;
  }
}

export async function resolveInterpreter(setting: string, resource: vscode.Uri | undefined): Promise<InterpreterChoice> {
  return chooseInterpreter(setting, setting.trim() ? undefined : await pythonExtensionInterpreter(resource));
}
