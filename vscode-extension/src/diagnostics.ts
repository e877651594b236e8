// "ShapeLens: Show Diagnostics Report": `shapelens doctor` run by the language server for the
// interpreter its runs use, with the effective `shapelens.*` settings, as one text to paste
// into a bug report. Pure: the command in commands.ts asks the server and opens the text.
import { Settings } from "./settings";

export const DOCTOR_COMMAND = "shapelens.doctor";

export interface DoctorReply {
  report: string; // the text: the interpreter, torch, tracing core, trace folders, settings
  error?: string; // set when the interpreter cannot be used (the report is then that one line)
}

/** What the server's `shapelens.doctor` command is sent: the settings to show. */
export function doctorArgument(settings: Settings): { settings: Settings } {
  return { settings };
}

function isReply(value: unknown): value is DoctorReply {
  return typeof value === "object" && value !== null && typeof (value as DoctorReply).report === "string";
}

/**
 * The report as shown: the editor's line, then the server's report; when the server could
 * not answer (not started, a bad interpreter), why, and the settings the extension holds.
 */
export function diagnosticsText(reply: unknown, settings: Settings, editor: string): string {
  const head = `ShapeLens diagnostics (${editor})\n\n`;
  if (isReply(reply)) {
    return head + reply.report;
  }
  const why = reply instanceof Error ? reply.message : String(reply);
  const shown = JSON.stringify(settings, null, 2).split("\n").map((line) => `  ${line}`).join("\n");
  return `${head}language server: no report (${why})\nsettings (effective shapelens.*):\n${shown}\n`;
}
