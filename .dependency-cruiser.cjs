/**
 * The dependency rules of the code (issue 20, docs/architecture.md "Folders"), checked by
 * `npm run check:deps` (scripts/checkDependencies.ts) in `npm test`, and therefore in CI:
 *
 * 1. no-circular: no import cycle between modules anywhere in src/, workflows/, activities/, scripts/,
 *    bench/ and bin/. Type-only imports count: a cycle of types is a cycle of design all the same.
 *    dependency-cruiser checks this rule itself (`forbidden` below).
 * 2. no-bidirectional-folders: no two folders of the code import each other in both directions. A
 *    folder is what `options.reporterOptions.archi.collapsePattern` below matches: src/<folder>, each
 *    file directly in src/ on its own (src/main.ts, src/settings.ts, …), workflows, activities,
 *    scripts, bench, bin. dependency-cruiser's folder-scope rules see every nested directory and
 *    cycles of any length, so this rule is applied by scripts/checkDependencies.ts over the graph
 *    dependency-cruiser builds with these options. Test files (*.test.ts) are left out of it: nothing
 *    imports a test, and a test may use any folder as its fixture.
 *
 * `options.knownViolations` lists the folder pairs that still import each other both ways, each with the
 * change that removes it: the check prints them but does not fail on them, and fails when one of them no
 * longer occurs (remove it from the list then). Add nothing to that list: fix the imports instead.
 *
 * `npx depcruise . --config .dependency-cruiser.cjs --output-type archi` prints the folder graph with
 * the same grouping in Graphviz's dot language (`| dot -T svg > folders.svg` draws it).
 */
'use strict';
/* global module */
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment:
        'An import cycle: break it by moving what both sides need into a module of its own, or by passing it in.',
      from: {},
      to: { circular: true },
    },
  ],
  options: {
    includeOnly: '^(src|workflows|activities|scripts|bench|bin)/',
    exclude: { path: '(^|/)(node_modules|dist)/|^src/dashboard/public/' },
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    knownViolations: [],
    reporterOptions: {
      archi: { collapsePattern: '^(src/[^/]+|workflows|activities|scripts|bench|bin)' },
    },
  },
};
