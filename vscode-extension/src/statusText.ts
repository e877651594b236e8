// What the status-bar item says after a run (pure: unit-tested without VS Code).

export interface RunSummary {
  status: string;
  exitCode?: number;
  lines?: number;
  findings?: number;
  durationS?: number;
  message?: string;
  shapeOnly?: boolean;
  simulatedValues?: number; // values a shape-only run stood in for (loss.item(), if on a tensor)
  memory?: { peak: string; text: string } | null; // a shape-only run's peak, written by the server
}

export function finishedText(file: string, summary: RunSummary): { text: string; tooltip: string } {
  const findings = summary.findings ?? 0;
  const time = summary.durationS !== undefined ? ` ${summary.durationS.toFixed(1)}s` : "";
  // A shape-only run that stopped at a value it could not know went as far as shapes go.
  const fine = summary.status === "ok" || summary.status === "shape_only_stop";
  const icon = fine ? (findings ? "$(warning)" : "$(check)") : "$(error)";
  const shapes = summary.shapeOnly ? " · shapes only" : "";
  const count = summary.simulatedValues ?? 0;
  const simulated = count ? ` · ${count} simulated value${count === 1 ? "" : "s"}` : "";
  const memory = summary.memory ? ` · ${summary.memory.peak}` : "";
  const text = `${icon} ShapeLens:${time} · ${findings} finding${findings === 1 ? "" : "s"}${shapes}${simulated}${memory}`;
  let tooltip = `${file}: ${summary.status}${summary.message ? ` (${summary.message})` : ""}`;
  if (count) {
    tooltip += `\n${count} value${count === 1 ? "" : "s"} the program read had no data: simulated (hover a marked line)`;
  }
  if (summary.memory) {
    tooltip += `\n${summary.memory.text}`;
  }
  return { text, tooltip };
}
