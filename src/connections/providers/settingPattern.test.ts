/**
 * Setting patterns run in linear time: the patterns that backtrack for hours in a JavaScript RegExp
 * answer in milliseconds, what RE2 cannot run in linear time is refused when it is saved, and the
 * built-in catalog's patterns keep their meaning.
 */
import { describe, expect, it } from 'vitest';
import { loadProviderCatalog, providerSchema, withOverrides } from './catalog.js';
import { MAX_SETTING_VALUE_LENGTH, matchesSettingPattern, settingPatternProblem } from './settingPattern.js';

describe('setting patterns', () => {
  it('a catastrophic pattern on a long value answers in milliseconds', () => {
    // In a backtracking engine each extra character doubles the time: 26 took 3.7 s, 40 would take hours.
    for (const pattern of ['^(a|a)*$', '^(a+)+$', '^(a|aa)+$', '^(.*a){20}$', '^([a-z]+)*[0-9]$']) {
      const value = `${'a'.repeat(MAX_SETTING_VALUE_LENGTH - 1)}!`;
      const started = performance.now();
      expect(matchesSettingPattern(pattern, value)).toBe(false);
      expect(performance.now() - started, pattern).toBeLessThan(500);
    }
  });
  it('a value past the bound never matches', () => {
    expect(matchesSettingPattern('^.*$', 'a'.repeat(MAX_SETTING_VALUE_LENGTH + 1))).toBe(false);
    expect(matchesSettingPattern('^.*$', 'a'.repeat(MAX_SETTING_VALUE_LENGTH))).toBe(true);
  });
  it('refuses, with the reason, what is not RE2 or is too large', () => {
    expect(settingPatternProblem('(')).toMatch(/missing closing \)/);
    expect(settingPatternProblem('^(a)\\1$')).toMatch(/invalid escape/);
    expect(settingPatternProblem('^(?=a)')).toMatch(/unsupported Perl syntax/);
    expect(settingPatternProblem('x'.repeat(1001))).toMatch(/longer than 1000/);
    expect(settingPatternProblem('^((a{0,999}){0,999})$')).toBeDefined();
    expect(settingPatternProblem('^[A-Za-z0-9][A-Za-z0-9-]*$')).toBeUndefined();
  });
  it('an integration’s provider_settings with an invalid pattern are refused with the field', () => {
    const zendesk = loadProviderCatalog().get('zendesk');
    expect(() => withOverrides(zendesk, { connection_config: { subdomain: { pattern: '(' } } }, 'zd')).toThrow(
      /provider_settings of integration 'zd': connection_config\.subdomain\.pattern: .*missing closing/,
    );
  });
  it('every built-in pattern compiles and keeps its meaning on sample values', () => {
    const catalog = loadProviderCatalog();
    for (const name of catalog.names()) {
      for (const [setting, spec] of Object.entries(catalog.get(name).connection_config)) {
        if (spec.pattern === undefined) continue;
        expect(settingPatternProblem(spec.pattern), `${name}.${setting}`).toBeUndefined();
        for (const sample of [
          'acme',
          '1234',
          'https://na1.salesforce.com',
          'us21',
          'contoso.onmicrosoft.com',
          'a/b',
          'x.evil?',
        ]) {
          expect(matchesSettingPattern(spec.pattern, sample), `${name}.${setting} on ${sample}`).toBe(
            new RegExp(spec.pattern).test(sample),
          );
        }
      }
    }
    expect(
      providerSchema.safeParse({
        display_name: 'X',
        auth_mode: 'BASIC',
        connection_config: { a: { pattern: '^(a|a)*$' } },
      }).success,
    ).toBe(true);
  });
});
