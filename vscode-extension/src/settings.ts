// Typed extension settings (`shapelens.*`); invalid values fall back to defaults with a note.

export type DisplayMode = "decorations" | "inlayHints";
export type HintFormat = "compact" | "full";
export type DimNames = "off" | "names" | "both";

export interface Settings {
  displayMode: DisplayMode;
  maxHintLength: number;
  hintFormat: HintFormat;
  dimNames: DimNames;
  coverage: boolean;
  scalarsOnGpu: boolean;
  memory: boolean; // a real run counts its tensor memory and FLOPs too (a dispatch mode: slower)
  gpuMemory: string; // a shape-only run's GPU memory ("24GiB"; "": none)
  gpu: string; // or its GPU by name ("a100-80gb")
  interpreter: string;
  serverInterpreter: string; // a 3.11+ for the server when `interpreter` is 3.10 ("": the same)
  extraArgs: string[];
  extraEnv: Record<string, string>;
  timeout: number | null;
  traceDir: string; // one more folder where notebook kernels write their traces ("": none)
  findings: { broadcast: boolean; mismatch: boolean; nonfinite: boolean; warnings: boolean; degenerate: boolean; shapeComments: boolean; nonfiniteOnGpu: boolean };
}

export const DEFAULTS: Settings = {
  displayMode: "decorations",
  maxHintLength: 80,
  hintFormat: "compact",
  dimNames: "off",
  coverage: false,
  scalarsOnGpu: false,
  memory: false,
  gpuMemory: "",
  gpu: "",
  interpreter: "",
  serverInterpreter: "",
  extraArgs: [],
  extraEnv: {},
  timeout: null,
  traceDir: "",
  findings: { broadcast: true, mismatch: true, nonfinite: true, warnings: true, degenerate: true, shapeComments: true, nonfiniteOnGpu: false },
};

export type Getter = (key: string) => unknown;

export function readSettings(get: Getter): { settings: Settings; problems: string[] } {
  const problems: string[] = [];
  const pick = <T>(key: string, fallback: T, valid: (value: unknown) => value is T): T => {
    const value = get(key);
    if (value === undefined) {
      return fallback;
    }
    if (valid(value)) {
      return value;
    }
    problems.push(`shapelens.${key}: invalid value ${JSON.stringify(value)}, using the default`);
    return fallback;
  };
  const isBool = (v: unknown): v is boolean => typeof v === "boolean";
  const settings: Settings = {
    displayMode: pick("displayMode", DEFAULTS.displayMode, (v): v is DisplayMode => v === "decorations" || v === "inlayHints"),
    maxHintLength: pick("maxHintLength", DEFAULTS.maxHintLength, (v): v is number => Number.isInteger(v) && (v as number) >= 10),
    hintFormat: pick("hintFormat", DEFAULTS.hintFormat, (v): v is HintFormat => v === "compact" || v === "full"),
    dimNames: pick("dimNames", DEFAULTS.dimNames, (v): v is DimNames => v === "off" || v === "names" || v === "both"),
    coverage: pick("coverage", DEFAULTS.coverage, isBool),
    scalarsOnGpu: pick("scalarsOnGpu", DEFAULTS.scalarsOnGpu, isBool),
    memory: pick("memory", DEFAULTS.memory, isBool),
    gpuMemory: pick("gpuMemory", DEFAULTS.gpuMemory, (v): v is string => typeof v === "string"),
    gpu: pick("gpu", DEFAULTS.gpu, (v): v is string => typeof v === "string"),
    interpreter: pick("interpreter", DEFAULTS.interpreter, (v): v is string => typeof v === "string"),
    serverInterpreter: pick("serverInterpreter", DEFAULTS.serverInterpreter, (v): v is string => typeof v === "string"),
    extraArgs: pick("extraArgs", DEFAULTS.extraArgs, (v): v is string[] => Array.isArray(v) && v.every((a) => typeof a === "string")),
    extraEnv: pick("extraEnv", DEFAULTS.extraEnv, (v): v is Record<string, string> =>
      typeof v === "object" && v !== null && !Array.isArray(v) && Object.values(v).every((a) => typeof a === "string")),
    timeout: pick("timeout", DEFAULTS.timeout, (v): v is number | null => v === null || (typeof v === "number" && v > 0)),
    traceDir: pick("traceDir", DEFAULTS.traceDir, (v): v is string => typeof v === "string"),
    findings: {
      broadcast: pick("findings.broadcast", true, isBool),
      mismatch: pick("findings.mismatch", true, isBool),
      nonfinite: pick("findings.nonfinite", true, isBool),
      warnings: pick("findings.warnings", true, isBool),
      degenerate: pick("findings.degenerate", true, isBool),
      shapeComments: pick("findings.shapeComments", true, isBool),
      nonfiniteOnGpu: pick("findings.nonfiniteOnGpu", false, isBool),
    },
  };
  return { settings, problems };
}

/** What the language server reads (`initializationOptions` / didChangeConfiguration). */
export function serverSettings(settings: Settings, interpreter: string): { shapelens: Record<string, unknown> } {
  return {
    shapelens: {
      interpreter,
      extraEnv: settings.extraEnv,
      timeout: settings.timeout,
      findings: {
        broadcast: settings.findings.broadcast,
        mismatch: settings.findings.mismatch,
        nonfinite: settings.findings.nonfinite,
        warnings: settings.findings.warnings,
        degenerate: settings.findings.degenerate,
        shapeComments: settings.findings.shapeComments,
      },
      nonfiniteOnGpu: settings.findings.nonfiniteOnGpu,
      maxHintLength: Math.min(settings.maxHintLength, 200),
      hintFormat: settings.hintFormat,
      dimNames: settings.dimNames,
      coverage: settings.coverage,
      scalarsOnGpu: settings.scalarsOnGpu,
      memory: settings.memory,
      gpuMemory: settings.gpuMemory.trim() || null,
      gpu: settings.gpu.trim() || null,
      traceDir: settings.traceDir.trim() || null,
    },
  };
}

/** The interpreter that runs the language server: `shapelens.serverInterpreter`, else the one
 * that runs the user's code. */
export function serverCommand(settings: Settings, interpreter: string): string {
  return settings.serverInterpreter.trim() || interpreter;
}
