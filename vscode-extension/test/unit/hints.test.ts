import { describe, expect, it } from "vitest";
import { applyEdits, buildHints, Hint, truncate } from "../../src/hints";

const line = (n: number, label: string, extra: Partial<{ hits: number; findings: any[] }> = {}) => ({
  line: n,
  label,
  hits: extra.hits ?? 1,
  findings: extra.findings ?? [],
});

describe("buildHints", () => {
  it("uses the server's label and marks findings with their tone", () => {
    const hints = buildHints(
      [
        line(17, "pred (4,1) f32 cpu grad ×10"),
        line(18, "squared_diff (4,4) f32 cpu grad ×10", {
          findings: [{ kind: "broadcast", severity: "warning", message: "broadcast: ..." }],
        }),
        line(3, "", { findings: [{ kind: "dtype_mismatch", severity: "error", message: "..." }] }),
      ],
      200,
    );
    expect(hints).toEqual([
      { line: 17, text: "pred (4,1) f32 cpu grad ×10", tone: "hint" },
      { line: 18, text: "squared_diff (4,4) f32 cpu grad ×10  ⚠ broadcast", tone: "warning" },
      { line: 3, text: "✖ dtype mismatch", tone: "error" },
    ]);
  });

  it("says what the server's label says: nothing for a line it left empty", () => {
    // Compact hints leave counts of lines without values out (coverage puts them in the label).
    expect(buildHints([line(1, "", { hits: 10 }), line(2, "×10", { hits: 10 })], 80)).toEqual([
      { line: 2, text: "×10", tone: "hint" },
    ]);
  });

  it("cuts long labels with an ellipsis, never inside a surrogate pair", () => {
    expect(truncate("abcdef", 4)).toBe("abc…");
    expect(truncate("abc", 4)).toBe("abc");
    expect(truncate("a😀😀😀", 3)).toBe("a😀…");
    expect(buildHints([line(0, "x".repeat(50))], 12)[0].text).toBe("xxxxxxxxxxx…");
  });
});

describe("applyEdits", () => {
  const hints: Hint[] = [
    { line: 2, text: "a", tone: "hint" },
    { line: 5, text: "b", tone: "hint" },
    { line: 9, text: "c", tone: "warning" },
  ];

  it("moves hints below an insertion and drops hints on touched lines", () => {
    expect(applyEdits(hints, [{ startLine: 5, endLine: 5, insertedLines: 2 }]).map((h) => [h.line, h.text])).toEqual([
      [2, "a"],
      [11, "c"],
    ]);
  });

  it("moves hints up after a deletion of whole lines", () => {
    expect(applyEdits(hints, [{ startLine: 0, endLine: 2, insertedLines: 0 }]).map((h) => [h.line, h.text])).toEqual([
      [3, "b"],
      [7, "c"],
    ]);
  });

  it("applies several edits in order", () => {
    const result = applyEdits(hints, [
      { startLine: 0, endLine: 0, insertedLines: 1 },
      { startLine: 10, endLine: 10, insertedLines: 0 },
    ]);
    expect(result.map((h) => [h.line, h.text])).toEqual([
      [3, "a"],
      [6, "b"],
    ]);
  });
});
