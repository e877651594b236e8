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

  it("says nothing of memory for a real run", () => {
    const { text, tooltip } = finishedText("train.py", { status: "exception", findings: 0, memory: null });
    expect(text).toBe("$(error) ShapeLens: · 0 findings");
    expect(tooltip).toBe("train.py: exception");
  });
});
