/**
 * A script bundle in the compiled format (CommonJS, `module.exports.default`, what `service compile`
 * writes), from the source of its default-exported function. `ActionError` is in scope, as in a script.
 */
export function bundle(functionSource: string): string {
  return `"use strict";\nconst { ActionError } = require('integration-service/runtime');\nmodule.exports.default = ${functionSource};\n`;
}
