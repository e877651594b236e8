// @ts-check
// Driving the VS Code workbench in the browser the way a user does (keyboard, mouse) and reading
// what the user sees from the DOM. Every wait polls the DOM until a deadline: no fixed sleeps.

/** @typedef {import('playwright-core').Page} Page */

/**
 * One rendered line of the active editor.
 * @typedef {object} EditorLine
 * @property {number} number 1-based, from the line-number gutter
 * @property {string} text the line's text (non-breaking spaces made plain), without the
 *   debugger's inline values
 * @property {string[]} decorations the texts of `::before` / `::after` decorations on the line
 * @property {string[]} inlineValues the texts of the debugger's inline values on the line: VS Code
 *   draws them as injected text (real text in spans of class `debug-inline-value`), not as CSS
 * @property {string[]} debugMarks the debug class names drawn on the line: in the glyph margin
 *   (`codicon-debug-breakpoint`, `codicon-debug-stackframe`, …) and across the line
 *   (`debug-top-stack-frame-line`, …)
 */

/**
 * The helpers {@link installPageHelpers} puts into every page, as `globalThis.__shapelensE2E`.
 * @typedef {object} PageHelpers
 * @property {() => EditorLine[]} editorLines the active editor's rendered lines
 * @property {() => NotebookCell[]} notebookCells the rendered cell editors of the active notebook
 *   editor, from the top (markdown cells shown as rendered markdown have no editor)
 * @property {() => string[]} notifications the messages of the visible notifications (toasts and
 *   the notification centre)
 * @property {(lineStart: string, word: string) => { x: number, y: number } | null} wordCenter
 *   the centre of the first `word` on the line whose code starts with `lineStart`
 * @property {() => string} hoverText the text of the visible hover widgets
 * @property {() => string[]} problemRows the visible rows of the Problems panel
 * @property {() => { name: string, value: string }[]} variableRows the rendered rows of the
 *   Run and Debug view's Variables tree (scopes have an empty value)
 * @property {(viewTitle: string) => TreeRow[]} treeRows the rendered rows of the side bar view
 *   whose section header reads `viewTitle`
 * @property {() => ActiveTab} activeTab the active editor tab and its cursor's line
 */

/**
 * One rendered cell editor of a notebook.
 * @typedef {object} NotebookCell
 * @property {EditorLine[]} lines numbered 1, 2, … from the cell's top
 */

/**
 * One rendered row of a view's tree.
 * @typedef {object} TreeRow
 * @property {string} label
 * @property {string} description
 * @property {number} level 1 for a top-level row (`aria-level`)
 * @property {boolean | null} expanded null for a row that cannot expand
 */

/**
 * The active editor tab and the cursor's line as the status bar shows it.
 * @typedef {object} ActiveTab
 * @property {string} tab the active tab's file name (`data-resource-name`)
 * @property {number} line 1-based, from the status bar's "Ln N, Col M" (NaN when not shown)
 */

/**
 * Installed into every page with `addInitScript`. Self-contained: it is serialised into the page.
 */
export function installPageHelpers() {
  /** @param {string | null | undefined} text */
  const plain = (text) => (text ?? '').replace(/\u00a0/g, ' ');

  /**
   * The computed `content` of a pseudo-element is a CSS string: `"a \"b\""` → `a "b"`.
   * @param {string} content
   */
  const cssString = (content) => {
    if (!content || content === 'none' || content === 'normal') return '';
    const match = /^"(.*)"$/s.exec(content);
    if (!match) return content;
    return match[1].replace(/\\([0-9a-fA-F]{1,6}) ?|\\(.)/g, (_, hex, char) =>
      hex ? String.fromCodePoint(parseInt(hex, 16)) : char,
    );
  };

  const activeEditor = () =>
    document.querySelector('.part.editor .editor-group-container.active .editor-container .monaco-editor') ??
    document.querySelector('.part.editor .monaco-editor');

  /** @param {Element} element */
  const visible = (element) => {
    const box = element.getBoundingClientRect();
    return box.width > 0 && box.height > 0 && getComputedStyle(element).visibility !== 'hidden';
  };

  const INLINE_VALUE = '[class*="inline-value"]';

  /**
   * The debug class names of the editor's overlays and glyph-margin widgets, by the rendered line
   * they are drawn on (matched by vertical position: the glyph margin is laid out on its own).
   * @param {Element} editor
   * @param {HTMLElement[]} viewLines
   * @returns {Map<HTMLElement, string[]>}
   */
  const debugMarksByLine = (editor, viewLines) => {
    /** @type {Map<HTMLElement, string[]>} */
    const marks = new Map();
    const boxes = viewLines.map((line) => ({ line, box: line.getBoundingClientRect() }));
    const selector = '.view-overlays > div > div, .margin-view-overlays > div > div, .glyph-margin-widgets > div';
    for (const element of editor.querySelectorAll(selector)) {
      const names = [...element.classList].filter((name) => name.includes('debug'));
      if (names.length === 0) continue;
      const box = element.getBoundingClientRect();
      const middle = box.top + box.height / 2;
      const owner = boxes.find(({ box: line }) => middle >= line.top && middle < line.bottom)?.line;
      if (owner) marks.set(owner, [...(marks.get(owner) ?? []), ...names]);
    }
    return marks;
  };

  /**
   * The rendered lines of one editor, by line number. A notebook cell's editor shows no line
   * numbers by default: there `byOrder` numbers its lines 1, 2, … from the top.
   * @param {Element} editor
   * @param {boolean} byOrder
   * @returns {EditorLine[]}
   */
  const linesOf = (editor, byOrder) => {
    // A rendered line and its gutter number share the same `top`.
    /** @type {Map<string, number>} */
    const numberByTop = new Map();
    for (const overlay of editor.querySelectorAll('.margin-view-overlays > div')) {
      const number = overlay.querySelector('.line-numbers');
      const top = /** @type {HTMLElement} */ (overlay).style.top;
      if (number && top) numberByTop.set(top, Number(number.textContent?.trim()));
    }
    const viewLines = /** @type {HTMLElement[]} */ ([...editor.querySelectorAll('.view-lines > .view-line')]);
    const marks = debugMarksByLine(editor, viewLines);
    /** @type {(EditorLine & { top: number })[]} */
    const lines = [];
    for (const line of viewLines) {
      /** @type {string[]} */
      const decorations = [];
      /** @type {string[]} */
      const inlineValues = [];
      let text = '';
      for (const span of line.querySelectorAll('span')) {
        for (const pseudo of ['::before', '::after']) {
          const content = plain(cssString(getComputedStyle(span, pseudo).content));
          if (content) decorations.push(content);
        }
        if (span.matches(INLINE_VALUE) && !span.parentElement?.closest(INLINE_VALUE)) {
          inlineValues.push(plain(span.textContent).trim());
        }
      }
      const walker = document.createTreeWalker(line, NodeFilter.SHOW_TEXT);
      for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        if (!node.parentElement?.closest(INLINE_VALUE)) text += plain(node.textContent);
      }
      lines.push({
        number: numberByTop.get(line.style.top) ?? NaN,
        top: parseFloat(line.style.top),
        text,
        decorations,
        inlineValues,
        debugMarks: marks.get(line) ?? [],
      });
    }
    if (byOrder) {
      lines.sort((a, b) => a.top - b.top).forEach((line, index) => (line.number = index + 1));
    }
    return lines.sort((a, b) => a.number - b.number).map(({ top: _top, ...line }) => line);
  };

  /** @type {PageHelpers['editorLines']} */
  const editorLines = () => {
    const editor = activeEditor();
    return editor ? linesOf(editor, false) : [];
  };

  /** @type {PageHelpers['notebookCells']} */
  const notebookCells = () => {
    // The notebook editor is drawn in an overlay on top of the editor part, outside it in the DOM.
    const notebook = [...document.querySelectorAll('.notebookOverlay')].find(visible);
    if (!notebook) return [];
    return [...notebook.querySelectorAll('.monaco-list-row .monaco-editor')]
      .filter((editor) => !editor.parentElement?.closest('.monaco-editor') && visible(editor))
      .map((editor) => ({ top: editor.getBoundingClientRect().top, lines: linesOf(editor, true) }))
      .sort((a, b) => a.top - b.top)
      .map(({ lines }) => ({ lines }));
  };

  /** @type {PageHelpers['notifications']} */
  const notifications = () =>
    [...document.querySelectorAll('.notifications-toasts .notification-toast, .notifications-center .notification-list-item')]
      .filter(visible)
      .map((element) => plain(element.querySelector('.notification-list-item-message')?.textContent).trim())
      .filter(Boolean);

  /** @type {PageHelpers['wordCenter']} */
  const wordCenter = (lineStart, word) => {
    const editor = activeEditor();
    if (!editor) return null;
    for (const element of editor.querySelectorAll('.view-lines > .view-line')) {
      if (!plain(element.textContent).trim().startsWith(lineStart)) continue;
      const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
      for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        const index = plain(node.textContent).search(new RegExp(`\\b${word}\\b`));
        if (index < 0) continue;
        const range = document.createRange();
        range.setStart(node, index);
        range.setEnd(node, index + word.length);
        const box = range.getBoundingClientRect();
        if (box.width > 0) return { x: box.left + box.width / 2, y: box.top + box.height / 2 };
      }
    }
    return null;
  };

  /** @type {PageHelpers['hoverText']} */
  const hoverText = () =>
    [...document.querySelectorAll('.monaco-hover:not(.hidden)')]
      .filter(visible)
      .map((element) => plain(/** @type {HTMLElement} */ (element).innerText))
      .join('\n');

  /** @type {PageHelpers['problemRows']} */
  const problemRows = () =>
    [...document.querySelectorAll('.markers-panel .monaco-list-row')]
      .filter(visible)
      .map((row) => plain(/** @type {HTMLElement} */ (row).innerText).replace(/\s+/g, ' ').trim());

  /** @type {PageHelpers['variableRows']} */
  const variableRows = () =>
    [...document.querySelectorAll('.debug-variables .monaco-list-row')].filter(visible).map((row) => ({
      name: plain(row.querySelector('.name, .scope')?.textContent).replace(/\s*[=:]\s*$/, '').trim(),
      value: plain(row.querySelector('.value')?.textContent).trim(),
    }));

  /** @type {PageHelpers['treeRows']} */
  const treeRows = (viewTitle) => {
    const pane = [...document.querySelectorAll('.part.sidebar .pane')].find(
      (element) => plain(element.querySelector('.pane-header .title')?.textContent).trim() === viewTitle,
    );
    if (!pane) return [];
    return [...pane.querySelectorAll('.pane-body .monaco-list-row')].filter(visible).map((row) => {
      const expanded = row.getAttribute('aria-expanded');
      return {
        label: plain(row.querySelector('.label-name')?.textContent).trim(),
        description: plain(row.querySelector('.label-description')?.textContent).trim(),
        level: Number(row.getAttribute('aria-level') ?? NaN),
        expanded: expanded === null ? null : expanded === 'true',
      };
    });
  };

  /** @type {PageHelpers['activeTab']} */
  const activeTab = () => {
    const tab = document.querySelector('.part.editor .editor-group-container.active .tab.active');
    const status = plain(document.querySelector('#status\\.editor\\.selection')?.textContent);
    return {
      tab: tab?.getAttribute('data-resource-name') ?? '',
      line: Number(/Ln (\d+)/.exec(status)?.[1] ?? NaN),
    };
  };

  /** @type {PageHelpers} */
  const helpers = { editorLines, notebookCells, notifications, wordCenter, hoverText, problemRows, variableRows, treeRows, activeTab };
  globalThis.__shapelensE2E = helpers;
}

/** @param {Page} page @returns {Promise<EditorLine[]>} */
export function editorLines(page) {
  return page.evaluate(() => globalThis.__shapelensE2E.editorLines());
}

/**
 * Polls the active notebook's rendered cells until `accept` returns a result, and returns it. On
 * timeout, the error shows the cells as last seen.
 * @template T
 * @param {Page} page
 * @param {(cells: NotebookCell[]) => T | null | undefined | false} accept runs in Node on each poll
 * @param {{ timeout: number, what: string }} options
 * @returns {Promise<T>}
 */
export async function waitForCells(page, accept, options) {
  const deadline = Date.now() + options.timeout;
  /** @type {NotebookCell[]} */
  let cells = [];
  for (;;) {
    cells = await page.evaluate(
      () => new Promise((resolve) => requestAnimationFrame(() => resolve(globalThis.__shapelensE2E.notebookCells()))),
    );
    const result = accept(cells);
    if (result) return result;
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${options.timeout / 1000} s waiting for ${options.what}; the notebook showed:\n${formatCells(cells)}`);
    }
    await page.waitForTimeout(150); // the interval between polls, not a wait for an outcome
  }
}

/** @param {NotebookCell[]} cells */
export function formatCells(cells) {
  return cells.map((cell, index) => `  cell editor ${index + 1}:\n${formatLines(cell.lines)}`).join('\n') || '  (no cell editor)';
}

/**
 * Waits for a visible notification whose message contains every one of `substrings`; returns it.
 * @param {Page} page
 * @param {string[]} substrings
 * @param {number} timeout
 * @returns {Promise<string>}
 */
export async function waitForNotification(page, substrings, timeout) {
  try {
    const handle = await page.waitForFunction(
      (wanted) => globalThis.__shapelensE2E.notifications().find((text) => wanted.every((s) => text.includes(s))),
      substrings,
      { timeout, polling: 200 },
    );
    return /** @type {string} */ (await handle.jsonValue());
  } catch (error) {
    const shown = await page.evaluate(() => globalThis.__shapelensE2E.notifications());
    throw new Error(`no notification contains ${JSON.stringify(substrings)}; shown: ${JSON.stringify(shown)}: ${errorMessage(error)}`);
  }
}

/**
 * Waits until the workbench has loaded and the editor of `fileName` shows `expectText`.
 * @param {Page} page
 * @param {string} fileName
 * @param {string} expectText
 * @param {number} timeout
 */
export async function waitForEditor(page, fileName, expectText, timeout) {
  await page.locator('.monaco-workbench').waitFor({ state: 'visible', timeout });
  await page.locator(`.part.editor .tab[data-resource-name="${fileName}"]`).first().waitFor({ state: 'visible', timeout });
  await page.waitForFunction(
    (text) => globalThis.__shapelensE2E.editorLines().some((line) => line.text.includes(text)),
    expectText,
    { timeout, polling: 200 },
  );
}

/**
 * Runs a command through the command palette: F1, type the title, Enter on the matching entry.
 * The palette lists what was registered when it opened: an extension's commands were once
 * missing right after the workbench loaded on a busy machine, so the palette is opened again
 * until the entry shows up or `timeout` passes. Returns how many times it was opened.
 * @param {Page} page
 * @param {string} title as shown in the palette, e.g. "ShapeLens: Run File"
 * @param {number} timeout
 * @returns {Promise<number>}
 */
export async function runCommand(page, title, timeout) {
  const deadline = Date.now() + timeout;
  const left = (most = Infinity) => Math.max(1000, Math.min(most, deadline - Date.now()));
  const widget = page.locator('.quick-input-widget');
  const input = widget.locator('.quick-input-box input');
  for (let attempt = 1; ; attempt += 1) {
    await page.keyboard.press('F1');
    await input.waitFor({ state: 'visible', timeout: left() });
    await input.fill(`>${title}`);
    try {
      // Enter only once the focused entry is exactly this command.
      await page.waitForFunction(
        (wanted) => {
          const focused = document.querySelector('.quick-input-widget .quick-input-list .monaco-list-row.focused');
          const label = focused?.querySelector('.label-name, .monaco-icon-label')?.textContent ?? '';
          return label.replace(/\u00a0/g, ' ').trim() === wanted;
        },
        title,
        { timeout: left(5000), polling: 100 },
      );
    } catch (error) {
      if (Date.now() < deadline) {
        await page.keyboard.press('Escape');
        await widget.waitFor({ state: 'hidden', timeout: left(5000) });
        continue;
      }
      const rows = await widget.locator('.quick-input-list .monaco-list-row').allInnerTexts().catch(() => []);
      const entries = rows.map((row) => row.split('\n')[0]);
      throw new Error(
        `the command palette has no entry "${title}" after ${attempt} tries (entries: ${JSON.stringify(entries)}): ${errorMessage(error)}`,
      );
    }
    await page.keyboard.press('Enter');
    await widget.waitFor({ state: 'hidden', timeout: left() });
    return attempt;
  }
}

/**
 * Waits for a visible Problems panel row that contains every one of `substrings`; returns it.
 * @param {Page} page
 * @param {string[]} substrings
 * @param {number} timeout
 * @returns {Promise<string>}
 */
export async function waitForProblem(page, substrings, timeout) {
  try {
    const handle = await page.waitForFunction(
      (wanted) => globalThis.__shapelensE2E.problemRows().find((row) => wanted.every((s) => row.includes(s))),
      substrings,
      { timeout, polling: 200 },
    );
    return /** @type {string} */ (await handle.jsonValue());
  } catch (error) {
    const rows = await page.evaluate(() => globalThis.__shapelensE2E.problemRows());
    throw new Error(`no Problems row contains ${JSON.stringify(substrings)}; rows: ${JSON.stringify(rows)}: ${errorMessage(error)}`);
  }
}

/**
 * Moves the mouse onto `word` on the line starting with `lineStart` and waits for a hover that
 * contains every one of `expected`. Returns the hover text.
 * @param {Page} page
 * @param {string} lineStart
 * @param {string} word
 * @param {string[]} expected
 * @param {number} timeout
 * @returns {Promise<string>}
 */
export async function hoverWord(page, lineStart, word, expected, timeout) {
  const center = await wordCenter(page, lineStart, word);
  // Approach from the left, as a hand does: the editor starts its hover on mouse moves.
  await page.mouse.move(center.x - 40, center.y);
  await page.mouse.move(center.x, center.y, { steps: 5 });
  try {
    await page.waitForFunction(
      (substrings) => {
        const text = globalThis.__shapelensE2E.hoverText();
        return substrings.every((s) => text.includes(s));
      },
      expected,
      { timeout, polling: 100 },
    );
  } catch (error) {
    const seen = await page.evaluate(() => globalThis.__shapelensE2E.hoverText());
    throw new Error(`hovering "${word}" showed no hover containing ${JSON.stringify(expected)}; hover text: ${JSON.stringify(seen)}: ${errorMessage(error)}`);
  }
  return page.evaluate(() => globalThis.__shapelensE2E.hoverText());
}

/**
 * Moves the mouse off the editor and waits until no hover is shown.
 * @param {Page} page
 * @param {number} timeout
 */
export async function dismissHover(page, timeout) {
  const statusBar = await page.locator('.part.statusbar').boundingBox();
  await page.mouse.move(statusBar ? statusBar.x + statusBar.width / 2 : 0, statusBar ? statusBar.y - 2 : 0);
  await page.keyboard.press('Escape');
  await page.waitForFunction(() => globalThis.__shapelensE2E.hoverText() === '', undefined, { timeout, polling: 100 });
}

/**
 * Clicks on `word` on the line starting with `lineStart`: the editor gets the focus, the cursor
 * goes there.
 * @param {Page} page
 * @param {string} lineStart
 * @param {string} word
 */
export async function clickWord(page, lineStart, word) {
  const center = await wordCenter(page, lineStart, word);
  await page.mouse.click(center.x, center.y);
}

/**
 * @param {Page} page
 * @param {string} lineStart
 * @param {string} word
 */
async function wordCenter(page, lineStart, word) {
  const center = await page.evaluate(([start, w]) => globalThis.__shapelensE2E.wordCenter(start, w), [lineStart, word]);
  if (!center) throw new Error(`the editor shows no "${word}" on a line starting with "${lineStart}"`);
  return center;
}

/**
 * Polls the rendered editor lines until `accept` returns a result, and returns it. On timeout,
 * the error shows the lines as last seen.
 * @template T
 * @param {Page} page
 * @param {(lines: EditorLine[]) => T | null | undefined | false} accept runs in Node on each poll
 * @param {{ timeout: number, what: string, stableMs?: number }} options `stableMs`: the result
 *   must hold on every poll for this long (to see that it does not change back)
 * @returns {Promise<T>}
 */
export async function waitForLines(page, accept, options) {
  const deadline = Date.now() + options.timeout;
  /** @type {EditorLine[]} */
  let lines = [];
  /** @type {number | undefined} */
  let heldSince;
  for (;;) {
    // Read after the page's next frame is rendered.
    lines = await page.evaluate(
      () => new Promise((resolve) => requestAnimationFrame(() => resolve(globalThis.__shapelensE2E.editorLines()))),
    );
    const result = accept(lines);
    if (result) {
      heldSince ??= Date.now();
      if (Date.now() - heldSince >= (options.stableMs ?? 0)) return result;
    } else {
      heldSince = undefined;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${options.timeout / 1000} s waiting for ${options.what}; the editor showed:\n${formatLines(lines)}`);
    }
    await page.waitForTimeout(150); // the interval between polls, not a wait for an outcome
  }
}

/** @param {EditorLine[]} lines */
export function formatLines(lines) {
  /** @param {string} open @param {string[]} items @param {string} close */
  const group = (open, items, close) => (items.length ? `   ${open}${items.join(' | ')}${close}` : '');
  return lines
    .map(
      (line) =>
        `  ${String(line.number).padStart(3)} │ ${line.text}` +
        group('⟨', line.decorations, '⟩') +
        group('«inline value: ', line.inlineValues, '»') +
        group('[', line.debugMarks, ']'),
    )
    .join('\n');
}

/** @param {unknown} error */
export function errorMessage(error) {
  return error instanceof Error ? error.message : String(error);
}

/** @param {Page} page @returns {Promise<{ name: string, value: string }[]>} */
export function variableRows(page) {
  return page.evaluate(() => globalThis.__shapelensE2E.variableRows());
}

/**
 * Polls the rows of the side bar view `viewTitle` until `accept` returns a result, and returns
 * it. On timeout, the error shows the rows as last seen.
 * @template T
 * @param {Page} page
 * @param {string} viewTitle the view's section header, e.g. "ShapeLens"
 * @param {(rows: TreeRow[]) => T | null | undefined | false} accept runs in Node on each poll
 * @param {{ timeout: number, what: string }} options
 * @returns {Promise<T>}
 */
export async function waitForTreeRows(page, viewTitle, accept, options) {
  const deadline = Date.now() + options.timeout;
  for (;;) {
    const rows = await page.evaluate((title) => globalThis.__shapelensE2E.treeRows(title), viewTitle);
    const result = accept(rows);
    if (result) return result;
    if (Date.now() > deadline) {
      const shown = rows.map((row) => `  ${'  '.repeat(Math.max(0, row.level - 1))}${row.label}  ${row.description}`).join('\n');
      throw new Error(`timed out after ${options.timeout / 1000} s waiting for ${options.what}; the "${viewTitle}" view showed:\n${shown || '  (no rows)'}`);
    }
    await page.waitForTimeout(150); // the interval between polls, not a wait for an outcome
  }
}

/**
 * The row of the side bar view `viewTitle` whose label is `label` (the first one).
 * @param {Page} page
 * @param {string} viewTitle
 * @param {string} label
 */
export function treeRow(page, viewTitle, label) {
  const pane = page.locator('.part.sidebar .pane', { has: page.locator('.pane-header .title', { hasText: viewTitle }) });
  return pane.locator('.pane-body .monaco-list-row', { has: page.locator('.label-name', { hasText: label }) }).first();
}

/** @param {Page} page @returns {Promise<ActiveTab>} */
export function activeTab(page) {
  return page.evaluate(() => globalThis.__shapelensE2E.activeTab());
}
