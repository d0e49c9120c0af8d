/**
 * A webpack loader of the workflow bundle (src/temporal/workflowBundle.ts): `import text from
 * './file.ts?source'` gives workflow code the text of a TypeScript file that runs in a realm of its own
 * (workflows/realm/bootstrap.ts), with its types stripped and nothing else changed (no helpers, no
 * lowering: the realm is V8 of the same Node). The file must be one self-contained function
 * expression; an import, export or require left after stripping the types fails the bundle.
 * CommonJS because webpack loads loaders with `require`.
 */
'use strict';
/* global require, module */
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { transformSync } = require('esbuild');

/** @param {string} source the file's text @this {{ resourcePath: string }} */
module.exports = function realmSourceLoader(source) {
  const { code } = transformSync(String(source), {
    loader: 'ts',
    target: 'es2022',
    sourcefile: this.resourcePath,
    legalComments: 'none',
  });
  if (/^\s*(import|export)\b/m.test(code) || /\brequire\s*\(/.test(code)) {
    throw new Error(
      `${this.resourcePath}: code for a realm of its own must be self-contained (only \`import type\`): it has an import, export or require after its types are stripped`,
    );
  }
  return `module.exports = ${JSON.stringify(code)};\n`;
};
