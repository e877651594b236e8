// Which Python runs the user's code (and the server): an explicit setting wins, then the
// Python extension's selected interpreter, then python3 on PATH.

export interface InterpreterChoice {
  path: string;
  source: "setting" | "python extension" | "default";
}

export function chooseInterpreter(setting: string, fromPythonExtension: string | undefined): InterpreterChoice {
  if (setting.trim()) {
    return { path: setting.trim(), source: "setting" };
  }
  if (fromPythonExtension) {
    return { path: fromPythonExtension, source: "python extension" };
  }
  return { path: "python3", source: "default" };
}
