import { describe, expect, it } from "vitest";
import { argsOf, configurationFor, launchRun, parseEnvFile, substitute } from "../../src/launchConfig";

describe("parseEnvFile", () => {
  it("reads the Python extension's .env format", () => {
    const text = [
      "# data",
      "export DATA_DIR=/data/shakespeare  # inline comment",
      'GREETING="hello\\nworld"',
      "RAW='${HOME} stays'",
      "CACHE=${DATA_DIR}/cache",
      "FROM_BASE=${USER}",
      "not a variable",
      "",
    ].join("\n");
    expect(parseEnvFile(text, { USER: "ada", HOME: "/home/ada" })).toEqual({
      DATA_DIR: "/data/shakespeare",
      GREETING: "hello\nworld",
      RAW: "${HOME} stays",
      CACHE: "/data/shakespeare/cache",
      FROM_BASE: "ada",
    });
  });
});

describe("launchRun", () => {
  it("turns nanoGPT's launch configuration into a run", () => {
    const config = {
      type: "shapelens",
      request: "launch",
      program: "/ws/train.py",
      args: ["config/train_shakespeare_char.py", "--device=cpu", "--compile=False"],
      cwd: "/ws",
      env: { OMP_NUM_THREADS: 1, UNSET_ME: null },
      nprocPerNode: 2,
      collectiveTimeout: 120,
    };
    expect(launchRun(config, "UNSET_ME=1\nSEED=3\nOMP_NUM_THREADS=8")).toEqual({
      run: {
        program: "/ws/train.py",
        args: ["config/train_shakespeare_char.py", "--device=cpu", "--compile=False"],
        cwd: "/ws",
        env: { SEED: "3", OMP_NUM_THREADS: "1" },
        nprocPerNode: 2,
        collectiveTimeout: 120,
      },
    });
  });

  it("runs a module", () => {
    expect(launchRun({ module: " pkg.train ", args: "--lr 0.1 \"a b\"" })).toEqual({
      run: { module: "pkg.train", args: ["--lr", "0.1", "a b"], env: {} },
    });
  });

  it("says what is wrong", () => {
    expect(launchRun({}).problem).toBe("give either program or module");
    expect(launchRun({ program: "a.py", module: "a" }).problem).toBe("give either program or module");
    expect(launchRun({ program: "a.py", args: [1] }).problem).toBe("args must be a list of strings");
    expect(launchRun({ program: "a.py", env: { A: { b: 1 } } }).problem).toBe("env.A must be a string");
    expect(launchRun({ program: "a.py", nprocPerNode: 0 }).problem).toBe("nprocPerNode must be a whole number, at least 1");
    expect(launchRun({ program: "a.py", collectiveTimeout: "60" }).problem).toBe(
      "collectiveTimeout must be a number of seconds, above 0",
    );
  });
});

describe("configurations for Run File", () => {
  it("substitutes launch.json's variables and finds the file's configuration", () => {
    const configs = substitute(
      [
        { type: "node", request: "launch", program: "${workspaceFolder}/train.py" },
        { type: "debugpy", request: "attach", program: "${workspaceFolder}/train.py" },
        { type: "debugpy", request: "launch", program: "${workspaceFolder}/train.py", args: ["--out=${env:OUT}"] },
      ],
      { workspaceFolder: "/ws" },
      { OUT: "/tmp/out" },
    ) as Record<string, unknown>[];
    const found = configurationFor(configs, "/ws/train.py", (a, b) => a === b);
    expect(found).toEqual({ type: "debugpy", request: "launch", program: "/ws/train.py", args: ["--out=/tmp/out"] });
    expect(configurationFor(configs, "/ws/other.py", (a, b) => a === b)).toBeUndefined();
  });

  it("accepts args as the Python extension does", () => {
    expect(argsOf(undefined)).toEqual([]);
    expect(argsOf(["a", "b"])).toEqual(["a", "b"]);
    expect(argsOf("a 'b c'")).toEqual(["a", "b c"]);
    expect(argsOf({})).toBeUndefined();
  });
});
