import { describe, expect, it } from "vitest";
import { chooseInterpreter } from "../../src/interpreter";
import { DEFAULTS, readSettings, serverCommand, serverSettings } from "../../src/settings";

describe("readSettings", () => {
  it("gives the defaults when nothing is set", () => {
    expect(readSettings(() => undefined)).toEqual({ settings: DEFAULTS, problems: [] });
  });

  it("reads valid values and reports invalid ones, keeping their defaults", () => {
    const values: Record<string, unknown> = {
      displayMode: "inlayHints",
      maxHintLength: 3,
      timeout: -1,
      extraArgs: ["--lr", "0.1"],
      extraEnv: { CUDA_VISIBLE_DEVICES: "0", BAD: 1 },
      "findings.broadcast": false,
      "findings.nonfinite": "yes",
      hintFormat: "full",
      dimNames: "both",
      coverage: "yes",
    };
    const { settings, problems } = readSettings((key) => values[key]);
    expect(settings.displayMode).toBe("inlayHints");
    expect(settings.maxHintLength).toBe(DEFAULTS.maxHintLength);
    expect(settings.timeout).toBeNull();
    expect(settings.hintFormat).toBe("full");
    expect(settings.dimNames).toBe("both");
    expect(settings.coverage).toBe(false);
    expect(settings.extraArgs).toEqual(["--lr", "0.1"]);
    expect(settings.extraEnv).toEqual({});
    expect(settings.findings).toEqual({ broadcast: false, mismatch: true, nonfinite: true, warnings: true, degenerate: true, shapeComments: true, nonfiniteOnGpu: false });
    expect(problems).toEqual([
      "shapelens.maxHintLength: invalid value 3, using the default",
      'shapelens.coverage: invalid value "yes", using the default',
      'shapelens.extraEnv: invalid value {"CUDA_VISIBLE_DEVICES":"0","BAD":1}, using the default',
      "shapelens.timeout: invalid value -1, using the default",
      'shapelens.findings.nonfinite: invalid value "yes", using the default',
    ]);
  });

  it("maps to the server's settings", () => {
    const { settings } = readSettings(
      (key) => ({ timeout: 30, "findings.mismatch": false, traceDir: " traces ", gpuMemory: "24GiB", memory: true })[key],
    );
    expect(serverSettings(settings, "/venv/bin/python")).toEqual({
      shapelens: {
        interpreter: "/venv/bin/python",
        extraEnv: {},
        timeout: 30,
        findings: { broadcast: true, mismatch: false, nonfinite: true, warnings: true, degenerate: true, shapeComments: true },
        nonfiniteOnGpu: false,
        maxHintLength: 80,
        hintFormat: "compact",
        dimNames: "off",
        coverage: false,
        scalarsOnGpu: false,
        memory: true,
        gpuMemory: "24GiB",
        gpu: null,
        traceDir: "traces",
      },
    });
    expect(serverSettings(readSettings(() => undefined).settings, "python3").shapelens.traceDir).toBeNull();
  });
});

describe("chooseInterpreter", () => {
  it("prefers the explicit setting, then the Python extension, then python3", () => {
    expect(chooseInterpreter(" /opt/py/bin/python ", "/venv/bin/python")).toEqual({
      path: "/opt/py/bin/python",
      source: "setting",
    });
    expect(chooseInterpreter("", "/venv/bin/python")).toEqual({ path: "/venv/bin/python", source: "python extension" });
    expect(chooseInterpreter("", undefined)).toEqual({ path: "python3", source: "default" });
  });
});

describe("serverCommand", () => {
  it("runs the server in shapelens.serverInterpreter when set, the user's code staying in its own", () => {
    const own = readSettings(() => undefined).settings;
    expect(serverCommand(own, "/venv310/bin/python")).toBe("/venv310/bin/python");
    const split = readSettings((key) => ({ serverInterpreter: " /usr/bin/python3.11 " })[key]).settings;
    expect(serverCommand(split, "/venv310/bin/python")).toBe("/usr/bin/python3.11");
    // the runs still go to the user's interpreter
    expect(serverSettings(split, "/venv310/bin/python").shapelens.interpreter).toBe("/venv310/bin/python");
  });
});
