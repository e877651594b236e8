// @ts-check
// Driving the VS Code workbench in the browser the way a user does (keyboard, mouse) and reading
// what the user sees from the DOM. Every wait polls the DOM until a deadline: no fixed sleeps.

/** @typedef {import('playwright-core').Page} Page */

/**
 * One rendered line of the active editor.
 * @typedef {object} EditorLine
 * @property {number} number 1-based, from the line-number gutter
 * @property {string} text the line's text (spaces normalised)
 * @property {string[]} decorations texts of `::before` / `::after` decorations on the line
 */

/**
 * What the helpers installed into the page return.
 * @typedef {object} PageHelpers
 * @property {() => EditorLine[]} editorLines
 * @property {(lineStart: string, word: string) => { x: number, y: number } | null} wordCenter
 * @property {() => string} hoverText
 * @property {() => string[]} problemRows
 * @property {() => string[]} notifications
 */

/**
 * Installed into every page with `addInitScript`: helpers the wait predicates call as
 * `globalThis.__shapelensE2E`. Self-contained, as it is serialised into the page.
 */
export function installPageHelpers() {
  /** @param {string | null | undefined} text */
  const normalise = (text) => (text ?? '').replace(/\u00a0/g, ' ');

  /** `"a \"b\""` → `a "b"`: the computed `content` of a pseudo-element is a CSS string. */
  /** @param {string} content */
  const cssString = (content) => {
    if (!content || content === 'none' || content === 'normal') return '';
    const match = /^"(.*)"$/s.exec(content);
    return match ? match[1].replace(/\\([0-9a-fA-F]{1,6}) ?|\\(.)/g, (_, hex, ch) => (hex ? String.fromCodePoint(parseInt(hex, 16)) : ch)) : content;
  };

  const activeEditor = () =>
    document.querySelector('.part.editor .editor-group-container.active .editor-container .monaco-editor') ??
    document.querySelector('.part.editor .monaco-editor');

  /** @returns {import('./workbench.mjs').EditorLine[]} */
  const editorLines = () => {
    const editor = activeEditor();
    if (!editor) return [];
    /** @type {Map<string, number>} */
    const numberByTop = new Map();
    for (const overlay of editor.querySelectorAll('.margin-view-overlays > div')) {
      const numberElement = overlay.querySelector('.line-numbers');
      const top = /** @type {HTMLElement} */ (overlay).style.top;
      if (numberElement && top) numberByTop.set(top, Number(numberElement.textContent?.trim()));
    }
    /** @type {import('./workbench.mjs').EditorLine[]} */
    const lines = [];
    for (const element of editor.querySelectorAll('.view-lines > .view-line')) {
      const line = /** @type {HTMLElement} */ (element);
      /** @type {string[]} */
      const decorations = [];
      for (const span of line.querySelectorAll('span')) {
        for (const pseudo of ['::before', '::after']) {
          const text = normalise(cssString(getComputedStyle(span, pseudo).content));
          if (text) decorations.push(text);
        }
      }
      lines.push({ number: numberByTop.get(line.style.top) ?? NaN, text: normalise(line.textContent), decorations });
    }
    return lines.sort((a, b) => a.number - b.number);
  };

  /**
   * The centre of the first `word` on the line whose code starts with `lineStart`.
   * @param {string} lineStart
   * @param {string} word
   */
  const wordCenter = (lineStart, word) => {
    const editor = activeEditor();
    if (!editor) return null;
    for (const element of editor.querySelectorAll('.view-lines > .view-line')) {
      if (!normalise(element.textContent).trim().startsWith(lineStart)) continue;
      const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
      for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        const index = normalise(node.textContent).search(new RegExp(`\\b${word}\\b`));
        if (index < 0) continue;
        const range = document.createRange();
        range.setStart(node, index);
        range.setEnd(node, index + word.length);
        const box = range.getBoundingClientRect();
        if (box.width === 0) continue;
        return { x: box.left + box.width / 2, y: box.top + box.height / 2 };
      }
    }
    return null;
  };

  /** @param {Element} element */
  const visible = (element) => {
    const box = element.getBoundingClientRect();
    return box.width > 0 && box.height > 0 && getComputedStyle(element).visibility !== 'hidden';
  };

  const hoverText = () =>
    [...document.querySelectorAll('.monaco-hover:not(.hidden)')]
      .filter(visible)
      .map((element) => normalise(/** @type {HTMLElement} */ (element).innerText))
      .join('\n');

  const problemRows = () =>
    [...document.querySelectorAll('.markers-panel .monaco-list-row')]
      .filter(visible)
      .map((row) => normalise(/** @type {HTMLElement} */ (row).innerText).replace(/\s+/g, ' ').trim());

  const notifications = () =>
    [...document.querySelectorAll('.notification-toast .notification-list-item, .notifications-center .notification-list-item')]
      .filter(visible)
      .map((item) => normalise(/** @type {HTMLElement} */ (item).innerText).replace(/\s+/g, ' ').trim());

  /** @type {PageHelpers} */
  const helpers = { editorLines, wordCenter, hoverText, problemRows, notifications };
  Object.assign(globalThis, { __shapelensE2E: helpers });
}

/** @param {Page} page @returns {Promise<EditorLine[]>} */
export function editorLines(page) {
  return page.evaluate(() => /** @type {{ __shapelensE2E: PageHelpers }} */ (/** @type {unknown} */ (globalThis)).__shapelensE2E.editorLines());
}

/**
 * Waits until the workbench has loaded and an editor shows `fileName` with `expectText`.
 * @param {Page} page
 * @param {string} fileName
 * @param {string} expectText
 * @param {number} timeout
 */
export async function waitForEditor(page, fileName, expectText, timeout) {
  await page.locator('.monaco-workbench').waitFor({ state: 'visible', timeout });
  await page
    .locator(`.part.editor .tab[data-resource-name="${fileName}"]`)
    .first()
    .waitFor({ state: 'visible', timeout });
  await page.waitForFunction(
    (text) =>
      /** @type {{ __shapelensE2E: PageHelpers }} */ (/** @type {unknown} */ (globalThis)).__shapelensE2E
        .editorLines()
        .some((line) => line.text.includes(text)),
    expectText,
    { timeout, polling: 200 },
  );
}

/**
 * Runs a command through the command palette: F1, type the title, Enter on the matching entry.
 * @param {Page} page
 * @param {string} title as shown in the palette, e.g. "ShapeLens: Run File"
 * @param {number} timeout
 */
export async function runCommand(page, title, timeout) {
  await page.keyboard.press('F1');
  const input = page.locator('.quick-input-widget .quick-input-box input');
  await input.waitFor({ state: 'visible', timeout });
  await input.fill(`>${title}`);
  // Enter only once the focused entry is exactly this command.
  await page.waitForFunction(
    (wanted) => {
      const focused = document.querySelector('.quick-input-widget .quick-input-list .monaco-list-row.focused');
      const label = focused?.querySelector('.label-name, .monaco-icon-label')?.textContent ?? '';
      return label.replace(/\u00a0/g, ' ').trim() === wanted;
    },
    title,
    { timeout, polling: 100 },
  ).catch(async (error) => {
    const rows = await page
      .locator('.quick-input-widget .quick-input-list .monaco-list-row')
      .allInnerTexts()
      .catch(() => []);
    throw new Error(`the command palette has no entry "${title}" (entries: ${JSON.stringify(rows)}): ${error.message}`);
  });
  await page.keyboard.press('Enter');
  await page.locator('.quick-input-widget').waitFor({ state: 'hidden', timeout });
}

/**
 * Moves the mouse onto `word` on the line starting with `lineStart` and waits for a hover
 * whose text passes `accept`. Returns the hover text.
 * @param {Page} page
 * @param {string} lineStart
 * @param {string} word
 * @param {string[]} expected substrings the hover must contain
 * @param {number} timeout
 */
export async function hoverWord(page, lineStart, word, expected, timeout) {
  const center = await page.evaluate(
    ([start, w]) => /** @type {{ __shapelensE2E: PageHelpers }} */ (/** @type {unknown} */ (globalThis)).__shapelensE2E.wordCenter(start, w),
    [lineStart, word],
  );
  if (!center) throw new Error(`no "${word}" on a line starting with "${lineStart}" in the editor`);
  // Approach from the left, as a hand does: the editor starts its hover on mouse moves.
  await page.mouse.move(center.x - 40, center.y);
  await page.mouse.move(center.x, center.y, { steps: 5 });
  try {
    await page.waitForFunction(
      (substrings) => {
        const text = /** @type {{ __shapelensE2E: PageHelpers }} */ (/** @type {unknown} */ (globalThis)).__shapelensE2E.hoverText();
        return substrings.every((s) => text.includes(s));
      },
      expected,
      { timeout, polling: 100 },
    );
  } catch (error) {
    const seen = await page.evaluate(() => /** @type {{ __shapelensE2E: PageHelpers }} */ (/** @type {unknown} */ (globalThis)).__shapelensE2E.hoverText());
    throw new Error(
      `hovering "${word}" showed no hover containing ${JSON.stringify(expected)}; hover text seen: ${JSON.stringify(seen)}: ${/** @type {Error} */ (error).message}`,
    );
  }
  return page.evaluate(() => /** @type {{ __shapelensE2E: PageHelpers }} */ (/** @type {unknown} */ (globalThis)).__shapelensE2E.hoverText());
}

/**
 * Clicks on `word` on the line starting with `lineStart` (puts the cursor there).
 * @param {Page} page
 * @param {string} lineStart
 * @param {string} word
 */
export async function clickWord(page, lineStart, word) {
  const center = await page.evaluate(
    ([start, w]) => /** @type {{ __shapelensE2E: PageHelpers }} */ (/** @type {unknown} */ (globalThis)).__shapelensE2E.wordCenter(start, w),
    [lineStart, word],
  );
  if (!center) throw new Error(`no "${word}" on a line starting with "${lineStart}" in the editor`);
  await page.mouse.click(center.x, center.y);
}

/**
 * Polls the rendered editor lines until `accept` returns a non-empty result, and returns it.
 * On timeout, the error shows the lines as last seen.
 * @template T
 * @param {Page} page
 * @param {(lines: EditorLine[]) => T | null | undefined | false} accept runs in Node on each poll
 * @param {{ timeout: number, what: string, stableMs?: number }} options `stableMs`: the result
 *   must hold on every poll for this long (to see that it is not about to change back)
 * @returns {Promise<T>}
 */
export async function waitForLines(page, accept, options) {
  const deadline = Date.now() + options.timeout;
  /** @type {EditorLine[]} */
  let lines = [];
  /** @type {number | undefined} */
  let heldSince;
  for (;;) {
    // Each poll waits for the next animation frame in the page: the DOM is read after rendering.
    lines = await page.evaluate(
      () =>
        new Promise((resolve) =>
          requestAnimationFrame(() =>
            resolve(/** @type {{ __shapelensE2E: PageHelpers }} */ (/** @type {unknown} */ (globalThis)).__shapelensE2E.editorLines()),
          ),
        ),
    );
    const result = accept(lines);
    if (result) {
      heldSince ??= Date.now();
      if (Date.now() - heldSince >= (options.stableMs ?? 0)) return result;
    } else {
      heldSince = undefined;
    }
    if (Date.now() > deadline) {
      throw new Error(
        `timed out after ${options.timeout / 1000} s waiting for ${options.what}; the editor showed:\n${formatLines(lines)}`,
      );
    }
    await page.waitForTimeout(150); // poll interval, not a wait for an outcome
  }
}

/** @param {EditorLine[]} lines */
export function formatLines(lines) {
  return lines
    .map((line) => `  ${String(line.number).padStart(3)} │ ${line.text}${line.decorations.length ? `   ⟨${line.decorations.join(' | ')}⟩` : ''}`)
    .join('\n');
}
