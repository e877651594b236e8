import { describe, expect, it } from "vitest";
import { diagnosticsText, doctorArgument } from "../../src/diagnostics";
import { DEFAULTS } from "../../src/settings";

describe("the diagnostics report", () => {
  it("sends the effective settings to the server's doctor", () => {
    const settings = { ...DEFAULTS, timeout: 30 };
    expect(doctorArgument(settings)).toEqual({ settings });
  });

  it("shows the server's report under the editor's line", () => {
    const report = "shapelens     0.1.0\ntracing core  gate (…)\nsettings (effective shapelens.*):\n  {}\n";
    expect(diagnosticsText({ report, diagnosis: {} }, DEFAULTS, "Visual Studio Code 1.99.0")).toBe(
      `ShapeLens diagnostics (Visual Studio Code 1.99.0)\n\n${report}`,
    );
  });

  it("shows an unusable interpreter's one line", () => {
    const line = "shapelens doctor: /usr/bin/python3.10 is Python 3.10.12: ShapeLens runs programs on Python 3.11 or newer\n";
    expect(diagnosticsText({ report: line, error: "…" }, DEFAULTS, "VS Code 1.99.0")).toContain(`\n\n${line}`);
  });

  it("says why there is no report, with the settings the extension holds", () => {
    const text = diagnosticsText(new Error("the ShapeLens language server is not running"), { ...DEFAULTS, interpreter: "/x/python" }, "VS Code 1.99.0");
    expect(text).toContain("language server: no report (the ShapeLens language server is not running)\n");
    expect(text).toContain('settings (effective shapelens.*):\n  {\n    "displayMode": "decorations",');
    expect(text).toContain('    "interpreter": "/x/python",');
  });
});
