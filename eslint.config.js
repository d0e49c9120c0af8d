// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    ignores: [
      'node_modules/**',
      'dist/**',
      '.service-data/**',
      'coverage/**',
      'test/fixtures/**/build/**',
      '**/service-integrations/build/**',
      // Scripts of user projects (the examples): `service compile` type-checks them with their own settings.
      'examples/*/service-integrations/**',
      // The globals of a script's realm: declarations for the scripts' program, not the service's.
      'src/runtime/scriptLib/globals.d.ts',
      // A project written for the de-facto product, as `service import` finds it (test/fixtures).
      '**/nango-integrations/**',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: {
        projectService: {
          allowDefaultProject: [
            'bin/*.js',
            'eslint.config.js',
            'src/runtime/*.cjs',
            'src/temporal/*.cjs',
            '.dependency-cruiser.cjs',
          ],
        },
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/only-throw-error': 'error',
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      // An async function that implements an async interface need not await anything.
      '@typescript-eslint/require-await': 'off',
    },
  },
  {
    // vitest's asymmetric matchers (expect.any, expect.stringContaining) are typed `any`.
    files: ['test/**/*.ts', 'src/**/*.test.ts'],
    rules: {
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      // vitest accepts an afterAll registered in a test, a hook or a helper they call, and never runs it.
      'no-restricted-syntax': [
        'error',
        {
          selector:
            "CallExpression[callee.name='afterAll']:not(Program > ExpressionStatement > CallExpression, CallExpression[callee.name='describe'] > :function > BlockStatement > ExpressionStatement > CallExpression, CallExpression[callee.object.name='describe'] > :function > BlockStatement > ExpressionStatement > CallExpression)",
          message:
            'afterAll runs only when registered at the top of a file or of a describe; elsewhere use deferCleanup (test/kit/cleanup.ts).',
        },
      ],
    },
  },
  {
    // Workflow code runs in Temporal's deterministic sandbox: no Node built-ins, no clocks of its own.
    files: ['workflows/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['node:*', 'fs', 'path', 'crypto', 'pg', 'axios', 'express'],
              message: 'Workflow code must stay deterministic: do this in an activity.',
            },
          ],
        },
      ],
    },
  },
);
