/**
 * Debian's Chromium, headless, driven by Playwright (playwright-core: no browser download). A test
 * that cannot find Chromium fails with the command that installs it; it never skips.
 */
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { deferCleanup } from '../kit/cleanup.js';

export const CHROMIUM_PATH = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';

/** A fresh headless Chromium (its own profile folder, removed afterwards) with a laptop-sized window. */
export async function useBrowser(): Promise<BrowserContext> {
  if (!existsSync(CHROMIUM_PATH)) {
    throw new Error(
      `Chromium is not installed at ${CHROMIUM_PATH}. The dashboard tests drive a real browser: install it with ` +
        '`apt-get install -y chromium` (Debian), or set CHROMIUM_PATH to a Chromium binary.',
    );
  }
  const profile = await mkdtemp(join(tmpdir(), 'dashboard-chromium-'));
  // launchPersistentContext, because Playwright takes the profile folder (--user-data-dir) only here.
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM_PATH,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
    viewport: { width: 1366, height: 768 },
    timeout: 30_000,
  });
  deferCleanup(async () => {
    await context.close();
    await rm(profile, { recursive: true, force: true });
  });
  return context;
}

/**
 * The browser, its first page and the screenshots folder, or the error that says why there is no
 * browser: the caller fails every test with it (a failed beforeAll would report them as skipped).
 */
export async function openBrowser(screenshots: string): Promise<{ context: BrowserContext; page: Page } | Error> {
  let context: BrowserContext;
  try {
    context = await useBrowser();
  } catch (error) {
    return error as Error;
  }
  await mkdir(screenshots, { recursive: true });
  return { context, page: context.pages()[0] ?? (await context.newPage()) };
}
