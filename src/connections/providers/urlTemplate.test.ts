/**
 * Filling the catalog's URL templates with hostile connection settings: whatever pattern an
 * integration gives a setting (`^.*$` here), a filled URL keeps the template's host, and a URL that
 * receives a secret keeps its literal domain. The built-in Zendesk, Shopify, Microsoft (tenant),
 * GitHub App (installation id) and Salesforce (instance URL) entries, then the schema's checks of
 * templates and patterns.
 */
import { describe, expect, it } from 'vitest';
import { ServiceError } from '../../errors.js';
import {
  fillTemplate,
  loadProviderCatalog,
  providerSchema,
  validateConnectionConfig,
  withOverrides,
} from './catalog.js';
import { parseUrlTemplate, secretUrlProblem, urlTemplateProblem } from './urlTemplate.js';

const catalog = loadProviderCatalog();

/** The built-in entry with every connection setting's pattern widened to anything, as a secret key may set it. */
function widened(name: string) {
  const provider = catalog.get(name);
  const lax = Object.fromEntries(
    Object.entries(provider.connection_config).map(([setting, spec]) => [setting, { ...spec, pattern: '^.*$' }]),
  );
  return withOverrides(provider, { connection_config: lax }, 'attacked');
}

/** Host spellings that end a host, leave it, or look like a dot: each must fail or stay under the domain. */
const HOST_ATTACKS = [
  '127.0.0.1:9/steal?',
  'attacker.example/steal?',
  'attacker.example#',
  'attacker.example?',
  'user@attacker.example',
  'attacker.example@',
  'attacker.example:443',
  'attacker.example\\',
  'attacker.example\\@',
  'attacker%2eexample%2f',
  'attacker%2Fexample',
  'attacker\u3002example', // ideographic full stop: URL parsing maps it to "."
  'attacker\uff0eexample', // fullwidth full stop
  'attacker\u2024example', // one dot leader
  '[::1]',
  '[::ffff:127.0.0.1]',
  'attacker.example.',
  '.attacker',
  ' attacker.example',
  'attacker.example\t',
  'attacker\nexample',
  'attacker.example%00',
  'attacker.example/',
  '//attacker.example',
  'ａｔｔａｃｋｅｒ.example',
  'a'.repeat(64),
  `${'a.'.repeat(130)}a`,
];

function outcome(fill: () => string): { refused: true } | { url: URL } {
  try {
    return { url: new URL(fill()) };
  } catch (error) {
    expect(error).toBeInstanceOf(ServiceError);
    expect((error as ServiceError).code).toBe('invalid_connection_config');
    return { refused: true };
  }
}

describe('a connection setting in a host position', () => {
  const secretUrls: { provider: string; field: 'token_url' | 'authorization_url'; domain: string; setting: string }[] =
    [
      { provider: 'zendesk', field: 'token_url', domain: '.zendesk.com', setting: 'subdomain' },
      { provider: 'zendesk', field: 'authorization_url', domain: '.zendesk.com', setting: 'subdomain' },
      { provider: 'shopify', field: 'token_url', domain: '.myshopify.com', setting: 'subdomain' },
      { provider: 'shopify', field: 'authorization_url', domain: '.myshopify.com', setting: 'subdomain' },
    ];
  for (const { provider: name, field, domain, setting } of secretUrls) {
    it(`${name} ${field}: no value moves the URL off ${domain}, whatever the pattern`, () => {
      const provider = widened(name);
      const template = (provider as unknown as Record<string, string>)[field]!;
      for (const value of HOST_ATTACKS) {
        const result = outcome(() => fillTemplate(template, provider, { [setting]: value }, field));
        if ('url' in result)
          expect(result.url.hostname, JSON.stringify(value)).toMatch(
            new RegExp(`^[a-z0-9.-]+${domain.replace(/\./g, '\\.')}$`),
          );
        // The same values are refused at the door (connect, import), before any URL is filled.
        expect(() => validateConnectionConfig(provider, { [setting]: value }), JSON.stringify(value)).toThrow(
          ServiceError,
        );
      }
      expect(fillTemplate(template, provider, { [setting]: 'acme' }, field)).toMatch(
        new RegExp(`^https://acme${domain.replace(/\./g, '\\.')}/`),
      );
    });
  }

  it('a value with dots stays in front of the literal domain', () => {
    const provider = widened('zendesk');
    const url = new URL(
      fillTemplate(
        provider.auth_mode === 'OAUTH2' ? provider.token_url : '',
        provider,
        { subdomain: 'attacker.example' },
        'token URL',
      ),
    );
    expect(url.hostname).toBe('attacker.example.zendesk.com');
  });
});

describe('a connection setting in a path position', () => {
  const PATH_ATTACKS = [
    '..',
    '.',
    '../../attacker',
    'x/../../steal',
    'x?steal=1',
    'x#',
    '%2e%2e',
    '..%2f..',
    'x\\..\\..',
    'a b',
    '@attacker.example',
    '127.0.0.1:9',
  ];
  const cases = [
    {
      provider: 'microsoft-graph-app',
      setting: 'tenant',
      host: 'login.microsoftonline.com',
      path: /^\/[^/]+\/oauth2\/v2\.0\/token$/,
    },
    {
      provider: 'github-app',
      setting: 'installation_id',
      host: 'api.github.com',
      path: /^\/app\/installations\/[^/]+\/access_tokens$/,
    },
  ];
  for (const { provider: name, setting, host, path } of cases) {
    it(`${name} token_url: the value is one segment of the path on ${host}, whatever the pattern`, () => {
      const provider = widened(name);
      const template = (provider as unknown as { token_url: string }).token_url;
      for (const value of PATH_ATTACKS) {
        const result = outcome(() => fillTemplate(template, provider, { [setting]: value }, 'token URL'));
        if (!('url' in result)) continue;
        expect(result.url.host, value).toBe(host);
        expect(result.url.pathname, value).toMatch(path);
        expect(result.url.search, value).toBe('');
        expect(result.url.hash, value).toBe('');
        expect(decodeURIComponent(result.url.pathname.split('/').at(name === 'github-app' ? 3 : 1)!), value).toBe(
          value,
        );
      }
    });
  }
  it('keeps the values real tenants and installations have', () => {
    const microsoft = catalog.get('microsoft-graph-app');
    expect(
      fillTemplate(
        (microsoft as { token_url: string }).token_url,
        microsoft,
        { tenant: 'contoso.onmicrosoft.com' },
        't',
      ),
    ).toBe('https://login.microsoftonline.com/contoso.onmicrosoft.com/oauth2/v2.0/token');
    const github = catalog.get('github-app');
    expect(fillTemplate((github as { token_url: string }).token_url, github, { installation_id: '4242' }, 't')).toBe(
      'https://api.github.com/app/installations/4242/access_tokens',
    );
  });
});

describe('a connection setting that is a whole origin (Salesforce instance_url)', () => {
  it('is an origin and nothing else, whatever the pattern', () => {
    const provider = widened('salesforce');
    const template = provider.base_url!;
    expect(fillTemplate(template, provider, { instance_url: 'https://na1.salesforce.com' }, 'base')).toBe(
      'https://na1.salesforce.com',
    );
    for (const value of [
      'https://user@attacker.example',
      'https://attacker.example/path',
      'https://attacker.example?x',
      'javascript:alert(1)',
      'file:///etc/passwd',
      'attacker.example',
      'https://attacker.example\\@na1.salesforce.com',
    ]) {
      const result = outcome(() => fillTemplate(template, provider, { instance_url: value }, 'base'));
      if ('url' in result) expect(['http:', 'https:']).toContain(result.url.protocol);
      if ('url' in result) expect(result.url.username + result.url.password + result.url.pathname, value).toBe('/');
    }
  });
});

describe('templates', () => {
  it('knows each placeholder’s position', () => {
    const positions = (template: string) =>
      parseUrlTemplate(template)
        .filter((part) => part.kind === 'setting')
        .map((part) => part.position);
    expect(
      positions(
        'https://${connectionConfig.a}.x.com/p/${connectionConfig.b}?q=${connectionConfig.c}#${connectionConfig.d}',
      ),
    ).toEqual(['host', 'path', 'query', 'fragment']);
    expect(positions('${connectionConfig.a}/x/${connectionConfig.b}')).toEqual(['origin', 'path']);
    expect(positions('https://x.com\\${connectionConfig.a}')).toEqual(['path']);
  });
  it('refuses templates of no known shape', () => {
    for (const template of [
      'ftp://x.com/${connectionConfig.a}',
      'x.com/${connectionConfig.a}',
      '${connectionConfig.a}${connectionConfig.b}',
      '${connectionConfig.a}.evil.com',
      '${connectionConfig.a}:8443/x',
      'http://[fe80::1%25lo]:80',
      'http://exa mple.com',
    ]) {
      expect(urlTemplateProblem(template), template).toBeDefined();
    }
    expect(urlTemplateProblem('https://${connectionConfig.a}.x.com/p')).toBeUndefined();
    expect(urlTemplateProblem('http://127.0.0.1:4010/api')).toBeUndefined();
  });
  it('a URL that receives a secret keeps a literal domain of two labels or more', () => {
    expect(secretUrlProblem('https://${connectionConfig.s}.zendesk.com/oauth/tokens')).toBeUndefined();
    expect(secretUrlProblem('https://login.example.com/${connectionConfig.t}/token')).toBeUndefined();
    expect(secretUrlProblem('https://${connectionConfig.host}/oauth/token')).toBeDefined();
    expect(secretUrlProblem('https://auth.${connectionConfig.domain}/oauth/token')).toBeDefined();
    expect(secretUrlProblem('https://${connectionConfig.s}.com/oauth/token')).toBeDefined();
    expect(secretUrlProblem('${connectionConfig.instance}/oauth/token')).toBeDefined();
  });
  it('the schema refuses a secret URL whose domain a setting decides, and an unparseable base URL', () => {
    const oauth = {
      display_name: 'X',
      auth_mode: 'OAUTH2',
      authorization_url: 'https://x.example.com/authorize',
      token_url: 'https://x.example.com/token',
    };
    expect(providerSchema.safeParse(oauth).success).toBe(true);
    expect(providerSchema.safeParse({ ...oauth, token_url: 'https://${connectionConfig.host}/token' }).success).toBe(
      false,
    );
    expect(providerSchema.safeParse({ ...oauth, authorization_url: '${connectionConfig.o}/authorize' }).success).toBe(
      false,
    );
    expect(providerSchema.safeParse({ ...oauth, base_url: 'http://[fe80::1%25lo]:80' }).success).toBe(false);
    expect(providerSchema.safeParse({ ...oauth, base_url: 'https://${connectionConfig.host}/api/v4' }).success).toBe(
      true,
    );
  });
});
