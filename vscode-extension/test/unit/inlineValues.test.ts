import { describe, expect, it } from "vitest";
import { bindingLine, parseHelperResult, placeInlineValues } from "../../src/inlineValues";

describe("parseHelperResult", () => {
  it("reads the repr of the helper's string", () => {
    const values = parseHelperResult(`"pred\\t(4,1) f32 cpu grad\\nbatch['x']\\t(2,3) f16 cpu"`);
    expect([...values]).toEqual([
      ["pred", "(4,1) f32 cpu grad"],
      ["batch['x']", "(2,3) f16 cpu"],
    ]);
  });

  it("gives nothing for an empty or failed evaluation", () => {
    expect(parseHelperResult("''").size).toBe(0);
    expect(parseHelperResult("NameError: name 'x' is not defined").size).toBe(0);
  });
});

describe("placing values", () => {
  const source = [
    "def train(model, x, y):", // 0
    "    for step in range(10):", // 1
    "        pred = model(x)", // 2
    "        loss = (pred - y) ** 2", // 3
    "        if loss == 0:", // 4
    "            break", // 5
    "        loss.backward()", // 6
  ];

  it("finds the line that last bound a name: assignment, for target, def argument", () => {
    expect(bindingLine(source, "pred", 0, 6)).toBe(2);
    expect(bindingLine(source, "loss", 0, 6)).toBe(3); // `loss == 0` is not a binding
    expect(bindingLine(source, "step", 0, 6)).toBe(1);
    expect(bindingLine(source, "x", 0, 6)).toBe(0);
    expect(bindingLine(source, "pred", 0, 1)).toBeUndefined(); // not bound yet at the stop
  });

  it("places container entries at their container's binding, in line order", () => {
    const values = new Map([
      ["loss", "() f32 cpu grad"],
      ["pred", "(4,1) f32 cpu grad"],
      ["x", "(4,2) f32 cpu"],
      ["unknown", "(1,) f32 cpu"],
    ]);
    expect(placeInlineValues(values, source, 0, 6)).toEqual([
      { name: "x", label: "(4,2) f32 cpu", line: 0 },
      { name: "pred", label: "(4,1) f32 cpu grad", line: 2 },
      { name: "loss", label: "() f32 cpu grad", line: 3 },
    ]);
  });
});
