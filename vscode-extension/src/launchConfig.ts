// Launch configurations as runs (pure logic, no vscode import: unit-tested in plain Node).
// A `shapelens` configuration run with Ctrl+F5, a Python extension `debugpy` one run with
// ShapeLens, and Run File using the configuration written for that file all become a LaunchRun.

export interface LaunchRun {
  program?: string; // a file to run, or
  module?: string; // a module, run as `python -m`
  args: string[];
  cwd?: string;
  env: Record<string, string>; // env, with envFile's variables under it
  nprocPerNode?: number;
  collectiveTimeout?: number; // seconds every rank may wait in a collective before the run is hung
}

export const RUNNABLE_TYPES = new Set(["shapelens", "debugpy", "python"]);

type Config = Record<string, unknown>;

/** Variables of a `.env` file: `KEY=value`, `export KEY=value`, quotes, `# comments`,
 * `${NAME}` expanded from earlier lines, then from `base` (the Python extension's format). */
export function parseEnvFile(text: string, base: Record<string, string | undefined> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const raw of text.split(/\r?\n/)) {
    const match = /^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_.-]*)\s*=\s*(.*?)\s*$/.exec(raw);
    if (!match) {
      continue; // blank lines, comments, anything else
    }
    let value = match[2];
    const quote = value[0];
    if ((quote === '"' || quote === "'") && value.length >= 2 && value.endsWith(quote)) {
      value = value.slice(1, -1);
      if (quote === '"') {
        value = value.replace(/\\n/g, "\n");
      }
    } else {
      value = value.replace(/\s+#.*$/, ""); // a trailing comment
    }
    if (quote !== "'") {
      value = value.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (_, name: string) => env[name] ?? base[name] ?? "");
    }
    env[match[1]] = value;
  }
  return env;
}

/** `${workspaceFolder}`, `${file}`, `${fileDirname}`, `${env:NAME}` in a configuration read
 * from launch.json (VS Code substitutes them only for sessions it starts itself). */
export function substitute(value: unknown, vars: Record<string, string>, env: Record<string, string | undefined>): unknown {
  if (typeof value === "string") {
    return value.replace(/\$\{(env:)?([A-Za-z_][A-Za-z0-9_]*)\}/g, (whole, isEnv: string | undefined, name: string) =>
      isEnv ? (env[name] ?? "") : (vars[name] ?? whole),
    );
  }
  if (Array.isArray(value)) {
    return value.map((item) => substitute(item, vars, env));
  }
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, substitute(v, vars, env)]));
  }
  return value;
}

/** The run a configuration describes, or what is wrong with it. `envFileText` is the
 * content of its `envFile` (read by the caller); `env` wins over it, as in the Python extension. */
export function launchRun(
  config: Config,
  envFileText?: string,
  baseEnv: Record<string, string | undefined> = {},
): { run?: LaunchRun; problem?: string } {
  const { program, module, cwd, nprocPerNode, collectiveTimeout } = config;
  if (program !== undefined && typeof program !== "string") {
    return { problem: "program must be a path" };
  }
  if (module !== undefined && (typeof module !== "string" || !module.trim())) {
    return { problem: "module must be a module name" };
  }
  if (!program === !module) {
    return { problem: "give either program or module" };
  }
  const args = argsOf(config.args);
  if (args === undefined) {
    return { problem: "args must be a list of strings" };
  }
  if (cwd !== undefined && typeof cwd !== "string") {
    return { problem: "cwd must be a path" };
  }
  const env: Record<string, string> = envFileText === undefined ? {} : parseEnvFile(envFileText, baseEnv);
  if (config.env !== undefined) {
    if (!config.env || typeof config.env !== "object" || Array.isArray(config.env)) {
      return { problem: "env must map names to strings" };
    }
    for (const [name, value] of Object.entries(config.env)) {
      if (value === null) {
        delete env[name]; // the Python extension's way to unset: it stays unset here too
      } else if (typeof value === "string" || typeof value === "number" || typeof value === "boolean") {
        env[name] = String(value);
      } else {
        return { problem: `env.${name} must be a string` };
      }
    }
  }
  if (nprocPerNode !== undefined && !(Number.isInteger(nprocPerNode) && (nprocPerNode as number) >= 1)) {
    return { problem: "nprocPerNode must be a whole number, at least 1" };
  }
  if (collectiveTimeout !== undefined && !(typeof collectiveTimeout === "number" && collectiveTimeout > 0)) {
    return { problem: "collectiveTimeout must be a number of seconds, above 0" };
  }
  return {
    run: {
      ...(program ? { program: program as string } : { module: (module as string).trim() }),
      args,
      ...(cwd ? { cwd } : {}),
      env,
      ...(nprocPerNode ? { nprocPerNode: nprocPerNode as number } : {}),
      ...(collectiveTimeout !== undefined ? { collectiveTimeout: collectiveTimeout as number } : {}),
    },
  };
}

/** A list of strings, or one string split at spaces (outside quotes), as the Python extension accepts. */
export function argsOf(value: unknown): string[] | undefined {
  if (value === undefined) {
    return [];
  }
  if (Array.isArray(value)) {
    return value.every((a) => typeof a === "string") ? (value as string[]) : undefined;
  }
  if (typeof value === "string") {
    return (value.match(/"[^"]*"|'[^']*'|\S+/g) ?? []).map((a) => a.replace(/^(["'])(.*)\1$/, "$2"));
  }
  return undefined;
}

/** The first launch configuration of a runnable type whose program is `file` (paths already substituted). */
export function configurationFor(configs: readonly Config[], file: string, samePath: (a: string, b: string) => boolean): Config | undefined {
  return configs.find(
    (c) =>
      RUNNABLE_TYPES.has(String(c.type)) &&
      c.request === "launch" &&
      typeof c.program === "string" &&
      samePath(c.program, file),
  );
}
