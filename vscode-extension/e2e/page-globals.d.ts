// Types of what lib/workbench.mjs's installPageHelpers puts into every page.
import type { PageHelpers } from './lib/workbench.mjs';

declare global {
  // eslint-disable-next-line no-var
  var __shapelensE2E: PageHelpers;
}

export {};
