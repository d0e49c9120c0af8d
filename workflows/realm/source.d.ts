/**
 * `import text from './file.ts?source'`: the file's code as a string, its types stripped, for a realm of
 * its own to evaluate (the workflow bundler's rule in src/temporal/workflowBundle.ts, with
 * src/temporal/realmSourceLoader.cjs). Only workflow code imports such text.
 */
declare module '*?source' {
  const source: string;
  export default source;
}
