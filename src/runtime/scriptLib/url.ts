/**
 * `url` for scripts (`import { URL, URLSearchParams } from 'url'`): the realm's own URL classes
 * (workflows/realm/bootstrap.ts builds them), bundled by `service compile` (src/cli/scriptModules.ts).
 */
const { URL, URLSearchParams } = globalThis;
export { URL, URLSearchParams };
export default { URL, URLSearchParams };
