// Types of what lib/workbench.mjs's installPageHelpers puts into every page.
import type { PageHelpers } from './lib/workbench.mjs';

declare global {
  var __shapelensE2E: PageHelpers;
}

export {};
