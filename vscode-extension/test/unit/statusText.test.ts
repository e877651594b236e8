import { describe, expect, it } from "vitest";
import { finishedText } from "../../src/statusText";

describe("finishedText", () => {
  it("gives a shape-only run's peak memory and, in the tooltip, the summary", () => {
    const { text, tooltip } = finishedText("train.py", {
      status: "ok",
      findings: 1,
      durationS: 7.96,
      shapeOnly: true,
      memory: { peak: "peak 12.3 MiB (123%)", text: "memory: peak 12.3 MiB on cuda:0 at train.py:12" },
    });
    expect(text).toBe("$(warning) ShapeLens: 8.0s · 1 finding · shapes only · peak 12.3 MiB (123%)");
    expect(tooltip).toBe("train.py: ok\nmemory: peak 12.3 MiB on cuda:0 at train.py:12");
  });

  it("counts the values a shape-only run simulated", () => {
    const { text, tooltip } = finishedText("train.py", {
      status: "ok",
      findings: 0,
      durationS: 2,
      shapeOnly: true,
      simulatedValues: 12,
      memory: null,
    });
    expect(text).toBe("$(check) ShapeLens: 2.0s · 0 findings · shapes only · 12 simulated values");
    expect(tooltip).toBe(
      "train.py: ok\n12 values the program read had no data: simulated (hover a marked line)",
    );
    const one = finishedText("train.py", { status: "ok", shapeOnly: true, simulatedValues: 1 });
    expect(one.text).toContain("· 1 simulated value");
  });

  it("says nothing of memory for a real run", () => {
    const { text, tooltip } = finishedText("train.py", { status: "exception", findings: 0, memory: null });
    expect(text).toBe("$(error) ShapeLens: · 0 findings");
    expect(tooltip).toBe("train.py: exception");
  });
});
