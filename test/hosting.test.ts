/**
 * The production hosting files (issue 21, item 7), checked as far as a machine without Docker or
 * Kubernetes allows: the Dockerfile, hosting/docker-compose.production.yml, hosting/kubernetes/ (the api
 * and worker Deployments, their Service, ConfigMap and Secret references, and the values for Temporal's
 * Helm chart) and the Temporal scripts they run. Each file parses; every image is pinned to an exact
 * release, Temporal's to 1.29.1; each process (api, worker; in Compose and in Kubernetes) gets every
 * variable it needs, only variables the service reads, and they parse as its settings at start; secrets
 * come from the environment or a Secret, never from the file; addresses and credentials match the
 * services they name; probes and health checks use the ports and paths the service serves; a worker's
 * grace period covers a request at its timeout; and the Temporal CLI accepts the namespace script.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { z } from 'zod';
import { loadEncryptor } from '../src/connections/encryption.js';
import { findTemporalCli, TEMPORAL_CLI_VERSION } from '../src/devstack/temporal.js';
import { REQUEST_TIMEOUT_MS } from '../src/runtime/http.js';
import { loadSettings, type Settings } from '../src/settings.js';
import { EXACT_TAG, interpolate, REPO, sourceFiles, tagOf, variablesTheServiceReads } from './helpers/hostingFiles.js';

/** The Temporal server release the project runs against (ARCHITECTURE: v1.29.1 on Postgres). */
const TEMPORAL_SERVER = '1.29.1';
const read = (path: string): string => readFileSync(join(REPO, path), 'utf8');
const pkg = JSON.parse(read('package.json')) as { version: string };
const SERVICE_IMAGE = `integration-service:${pkg.version}`;

// ---- Compose ----------------------------------------------------------------------------------------

const stringList = z.array(z.string());
const composeService = z
  .object({
    image: z.string(),
    command: z.union([z.string(), stringList]).optional(),
    entrypoint: z.union([z.string(), stringList]).optional(),
    environment: z.record(z.string(), z.string()).optional(),
    ports: stringList.optional(),
    volumes: stringList.optional(),
    depends_on: z.record(z.string(), z.object({ condition: z.string() })).optional(),
    healthcheck: z.object({ test: stringList }).passthrough().optional(),
    stop_grace_period: z.string().optional(),
    deploy: z.object({ replicas: z.number().int() }).optional(),
  })
  .passthrough();
const composeSchema = z.object({
  services: z
    .object({
      postgres: composeService,
      'temporal-schema': composeService,
      temporal: composeService,
      'temporal-namespace': composeService,
      'temporal-ui': composeService,
      api: composeService,
      worker: composeService,
    })
    .strict(),
  volumes: z.record(z.string(), z.null()),
});
// `<<` merge keys: the api and worker share their image and most of their environment.
const compose = composeSchema.parse(parse(read('hosting/docker-compose.production.yml'), { merge: true }));
const services = compose.services;
const composeVars = {
  POSTGRES_PASSWORD: randomBytes(24).toString('hex'),
  SERVICE_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
};
const composeEnv = (service: z.infer<typeof composeService>, vars: Record<string, string> = composeVars) =>
  Object.fromEntries(
    Object.entries(service.environment ?? {}).map(([name, value]) => [name, interpolate(value, vars)]),
  );

// ---- Kubernetes -------------------------------------------------------------------------------------

const envVar = z
  .object({
    name: z.string(),
    value: z.string().optional(),
    valueFrom: z
      .object({ secretKeyRef: z.object({ name: z.string(), key: z.string() }).strict() })
      .strict()
      .optional(),
  })
  .strict();
const httpProbe = z
  .object({ httpGet: z.object({ path: z.string(), port: z.union([z.string(), z.number()]) }) })
  .passthrough();
const container = z
  .object({
    name: z.string(),
    image: z.string(),
    ports: z.array(z.object({ name: z.string(), containerPort: z.number() })),
    envFrom: z.array(z.object({ configMapRef: z.object({ name: z.string() }) })),
    env: z.array(envVar),
    livenessProbe: httpProbe,
    readinessProbe: httpProbe,
    startupProbe: httpProbe.optional(),
    lifecycle: z.unknown().optional(),
    resources: z.unknown().optional(),
  })
  .strict();
const deployment = z.object({
  apiVersion: z.literal('apps/v1'),
  kind: z.literal('Deployment'),
  metadata: z.object({ name: z.string() }).passthrough(),
  spec: z
    .object({
      replicas: z.number().int().min(1),
      selector: z.object({ matchLabels: z.record(z.string(), z.string()) }),
      template: z.object({
        metadata: z.object({ labels: z.record(z.string(), z.string()) }),
        spec: z
          .object({ terminationGracePeriodSeconds: z.number(), containers: z.array(container).length(1) })
          .passthrough(),
      }),
    })
    .passthrough(),
});
const kubeService = z.object({
  kind: z.literal('Service'),
  metadata: z.object({ name: z.string() }).passthrough(),
  spec: z.object({
    selector: z.record(z.string(), z.string()),
    ports: z.array(z.object({ name: z.string(), port: z.number(), targetPort: z.union([z.string(), z.number()]) })),
  }),
});
const configMap = z.object({
  kind: z.literal('ConfigMap'),
  metadata: z.object({ name: z.string() }).passthrough(),
  data: z.record(z.string(), z.string()),
});
const secret = z.object({
  kind: z.literal('Secret'),
  metadata: z.object({ name: z.string() }).passthrough(),
  stringData: z.record(z.string(), z.string()),
});

/** Every document of a manifest file, each failing the test if it does not parse. */
function documents(path: string): unknown[] {
  return parseAllDocuments(read(path)).map((document) => {
    expect(document.errors, path).toEqual([]);
    return document.toJS() as unknown;
  });
}
const apiDocs = documents('hosting/kubernetes/api.yaml');
const apiDeployment = deployment.parse(apiDocs[0]);
const apiService = kubeService.parse(apiDocs[1]);
const workerDeployment = deployment.parse(documents('hosting/kubernetes/worker.yaml')[0]);
const settingsMap = configMap.parse(documents('hosting/kubernetes/configmap.yaml')[0]);
const secrets = documents('hosting/kubernetes/secret.example.yaml').map((doc) => secret.parse(doc));
const helmValues = z
  .object({
    server: z.object({
      image: z.object({ repository: z.string(), tag: z.union([z.string(), z.number()]) }),
      config: z.object({
        numHistoryShards: z.number(),
        persistence: z.object({
          defaultStore: z.literal('default'),
          default: z.object({ driver: z.literal('sql'), sql: z.record(z.string(), z.unknown()) }),
          visibility: z.object({ driver: z.literal('sql'), sql: z.record(z.string(), z.unknown()) }),
        }),
        namespaces: z.object({
          create: z.literal(true),
          namespace: z.array(z.object({ name: z.string() }).passthrough()),
        }),
      }),
    }),
    admintools: z.object({ image: z.object({ repository: z.string(), tag: z.string() }) }),
    web: z.object({ enabled: z.literal(true), image: z.object({ repository: z.string(), tag: z.string() }) }),
  })
  .passthrough()
  .parse(parse(read('hosting/kubernetes/temporal-values.yaml')));

/** A Deployment's container environment as the kubelet builds it: the ConfigMap, then `env`; secrets filled in. */
function kubeEnv(spec: z.infer<typeof deployment>, secretValues: Record<string, string>): Record<string, string> {
  const [main] = spec.spec.template.spec.containers;
  const env: Record<string, string> = {};
  for (const source of main!.envFrom) {
    expect(source.configMapRef.name).toBe(settingsMap.metadata.name);
    Object.assign(env, settingsMap.data);
  }
  for (const variable of main!.env) {
    if (variable.value !== undefined) env[variable.name] = variable.value;
    const ref = variable.valueFrom?.secretKeyRef;
    if (ref) {
      // The Secret and key the reference names are the ones the example shows how to create.
      const example = secrets.find((candidate) => candidate.metadata.name === ref.name);
      expect(Object.keys(example?.stringData ?? {}), `${ref.name}.${ref.key}`).toContain(ref.key);
      env[variable.name] = secretValues[ref.key] ?? '';
    }
  }
  return env;
}
const kubeSecretValues = {
  DATABASE_URL: 'postgres://service:s3cret@postgres:5432/service',
  SERVICE_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
};

// ---- The processes ---------------------------------------------------------------------------------

interface Process {
  where: string;
  role: 'api' | 'worker';
  env: Record<string, string>;
}
const processes: Process[] = [
  { where: 'compose api', role: 'api', env: composeEnv(services.api) },
  { where: 'compose worker', role: 'worker', env: composeEnv(services.worker) },
  { where: 'kubernetes api', role: 'api', env: kubeEnv(apiDeployment, kubeSecretValues) },
  { where: 'kubernetes worker', role: 'worker', env: kubeEnv(workerDeployment, kubeSecretValues) },
];

/** What every process needs set (its default does not fit a deployment), and what each role needs besides. */
const NEEDED = [
  'DATABASE_URL',
  'TEMPORAL_ADDRESS',
  'TEMPORAL_NAMESPACE',
  'TEMPORAL_TASK_QUEUE',
  'SERVICE_ROLE',
  'SERVICE_ENCRYPTION_KEY',
];
const NEEDED_BY_ROLE = {
  // Reachable from outside the container, and the address users and OAuth providers see.
  api: ['HOST', 'PORT', 'SERVICE_PUBLIC_URL'],
  // The health port that the probes and health checks ask.
  worker: ['SERVICE_HEALTH_PORT'],
};

const healthPort = (settings: Settings): number =>
  Number((settings as Settings & { SERVICE_HEALTH_PORT?: number }).SERVICE_HEALTH_PORT);

describe('the production hosting files', () => {
  it('pin every image to an exact release; Temporal is 1.29.1, the service is the Dockerfile’s build', () => {
    const images = [
      ...Object.entries(services).map(([name, service]) => [`compose ${name}`, service.image] as const),
      ...[apiDeployment, workerDeployment].map(
        (spec) => [spec.metadata.name, spec.spec.template.spec.containers[0]!.image] as const,
      ),
      ['helm server', `${helmValues.server.image.repository}:${helmValues.server.image.tag}`] as const,
      ['helm admintools', `${helmValues.admintools.image.repository}:${helmValues.admintools.image.tag}`] as const,
      ['helm web', `${helmValues.web.image.repository}:${helmValues.web.image.tag}`] as const,
    ];
    for (const [where, image] of images) {
      expect([where, tagOf(image)]).toEqual([where, expect.stringMatching(EXACT_TAG)]);
      expect(image).not.toMatch(/:latest\b/);
    }
    expect(services.temporal.image).toBe(`temporalio/server:${TEMPORAL_SERVER}`);
    expect(`${helmValues.server.image.repository}:${helmValues.server.image.tag}`).toBe(services.temporal.image);
    for (const image of [services['temporal-schema'].image, services['temporal-namespace'].image])
      expect(image).toBe(`${helmValues.admintools.image.repository}:${helmValues.admintools.image.tag}`);
    expect(tagOf(services['temporal-schema'].image).startsWith(`${TEMPORAL_SERVER}-`)).toBe(true);
    expect(services['temporal-ui'].image).toBe(`${helmValues.web.image.repository}:${helmValues.web.image.tag}`);
    // The same Postgres release as the development compose file.
    expect(read('docker-compose.yml')).toContain(`image: ${services.postgres.image}`);
    for (const image of [services.api.image, services.worker.image]) expect(image).toBe(SERVICE_IMAGE);
    for (const spec of [apiDeployment, workerDeployment])
      expect(spec.spec.template.spec.containers[0]!.image).toBe(SERVICE_IMAGE);
  });

  it('build the service image on the Node release of docker-compose.yml and start the built server itself', () => {
    const dockerfile = read('Dockerfile');
    const from = /^FROM (\S+)$/m.exec(dockerfile)?.[1] ?? '';
    const devNode = /image: (node:\S+)/.exec(read('docker-compose.yml'))?.[1] ?? '';
    expect(from).toBe(`${devNode}-slim`);
    // The build stage, on the same Node: `npm run build` (the server as JavaScript, the workflow bundle),
    // whose dist/ the image takes.
    expect(/^FROM (\S+) AS build$/m.exec(dockerfile)?.[1]).toBe(from);
    expect(dockerfile).toMatch(/^RUN npm run build$/m);
    expect(dockerfile).toMatch(/^COPY --from=build \/app\/dist \.\/dist$/m);
    // node itself as PID 1 (not npm), so that SIGTERM reaches the service and it drains; the built
    // JavaScript, what `npm run serve` runs (test/builtServer.test.ts runs it), not TypeScript through tsx.
    expect(/^CMD (.+)$/m.exec(dockerfile)?.[1]).toBe('["node", "dist/src/main.js"]');
    const manifest = JSON.parse(read('package.json')) as {
      scripts: Record<string, string>;
      dependencies: Record<string, string>;
    };
    expect(manifest.scripts['serve']).toBe('node dist/src/main.js');
    // `--omit=dev` leaves out what only development needs.
    expect(/^RUN npm install --omit=dev /m.test(dockerfile)).toBe(true);
    for (const name of ['tsx', '@temporalio/testing']) expect(Object.keys(manifest.dependencies)).not.toContain(name);
    expect(dockerfile).toMatch(/^USER node$/m);
    expect(/^EXPOSE (\d+)$/m.exec(dockerfile)?.[1]).toBe(String(loadSettings({}).PORT));
    // Everything the image copies from the repository exists, and .dockerignore lets it through.
    const ignore = read('.dockerignore');
    const copied = [...dockerfile.matchAll(/^COPY (?!--from)(.+) \S+$/gm)].flatMap(([, sources]) =>
      sources!.split(' '),
    );
    expect(copied).toContain('tsconfig.build.json');
    for (const source of copied) {
      expect(existsSync(join(REPO, source)), source).toBe(true);
      expect(ignore, source).toContain(`!${source}`);
    }
  });

  it.each(processes)(
    'give the $where process every variable it needs, only ones it reads, and they parse',
    ({ role, env }) => {
      const read = variablesTheServiceReads();
      expect(Object.keys(env).filter((name) => !read.has(name))).toEqual([]);
      expect([...NEEDED, ...NEEDED_BY_ROLE[role]].filter((name) => !env[name])).toEqual([]);
      const settings = loadSettings(env);
      expect(settings.SERVICE_ROLE).toBe(role);
      // Both servers named: production mode, where the encryption key is required, and it is given.
      expect(() => loadEncryptor({ env })).not.toThrow();
      if (role === 'api') expect(settings.HOST).toBe('0.0.0.0');
    },
  );

  it('take secrets from the environment (Compose) or a Secret (Kubernetes), never from the file', () => {
    for (const name of ['SERVICE_ENCRYPTION_KEY', 'DATABASE_URL']) {
      for (const service of [services.api, services.worker]) {
        expect(() => interpolate(service.environment?.[name] ?? '', {}), name).toThrow(/compose needs/);
      }
      for (const spec of [apiDeployment, workerDeployment]) {
        const variable = spec.spec.template.spec.containers[0]!.env.find((candidate) => candidate.name === name);
        expect(variable?.valueFrom?.secretKeyRef, `${spec.metadata.name} ${name}`).toBeDefined();
      }
      expect(Object.keys(settingsMap.data)).not.toContain(name);
    }
    for (const service of Object.values(services)) {
      for (const [name, value] of Object.entries(service.environment ?? {})) {
        if (/PASSWORD|PWD|KEY/.test(name)) expect(value, name).toMatch(/^\$\{[A-Z_]+:\?[^}]*\}$/);
      }
    }
    // Helm reads Temporal's database password from a Secret the example shows.
    for (const store of [
      helmValues.server.config.persistence.default,
      helmValues.server.config.persistence.visibility,
    ]) {
      expect(store.sql['password']).toBeUndefined();
      expect(secrets.map((candidate) => candidate.metadata.name)).toContain(store.sql['existingSecret']);
    }
    expect(secrets.find((candidate) => candidate.metadata.name === 'temporal-postgres')?.stringData).toHaveProperty(
      'password',
    );
  });

  it('agree between api and worker, and name the Postgres and Temporal they run beside', () => {
    const settingsOf = (where: string) => loadSettings(processes.find((process) => process.where === where)!.env);
    for (const platform of ['compose', 'kubernetes']) {
      const api = settingsOf(`${platform} api`);
      const worker = settingsOf(`${platform} worker`);
      for (const name of ['DATABASE_URL', 'TEMPORAL_ADDRESS', 'TEMPORAL_NAMESPACE', 'TEMPORAL_TASK_QUEUE'] as const)
        expect([platform, name, worker[name]]).toEqual([platform, name, api[name]]);
    }

    // Compose: the database URL is the Postgres service's, with its user, password and database.
    const settings = settingsOf('compose api');
    const database = new URL(settings.DATABASE_URL ?? '');
    const pg = composeEnv(services.postgres);
    expect([database.hostname, database.port]).toEqual(['postgres', '5432']);
    expect([database.username, database.password, database.pathname.slice(1)]).toEqual([
      pg['POSTGRES_USER'],
      pg['POSTGRES_PASSWORD'],
      pg['POSTGRES_DB'],
    ]);
    expect(services.postgres.healthcheck?.test.join(' ')).toContain(
      `-U ${pg['POSTGRES_USER']} -d ${pg['POSTGRES_DB']}`,
    );
    // Temporal's server and its schema job use the same Postgres and credentials.
    const temporal = composeEnv(services.temporal);
    const schema = composeEnv(services['temporal-schema']);
    expect(temporal).toMatchObject({ DB: 'postgres12', DB_PORT: '5432', POSTGRES_SEEDS: 'postgres' });
    expect([temporal['POSTGRES_USER'], temporal['POSTGRES_PWD']]).toEqual([
      pg['POSTGRES_USER'],
      pg['POSTGRES_PASSWORD'],
    ]);
    expect([schema['POSTGRES_SEEDS'], schema['POSTGRES_USER'], schema['SQL_PASSWORD']]).toEqual([
      'postgres',
      pg['POSTGRES_USER'],
      pg['POSTGRES_PASSWORD'],
    ]);
    expect(temporal['BIND_ON_IP']).toBe('0.0.0.0');
    // The service talks to that server, in the namespace the namespace job creates, after it exists.
    expect(settings.TEMPORAL_ADDRESS).toBe('temporal:7233');
    expect(services.temporal.healthcheck?.test).toEqual(['CMD', 'nc', '-z', 'localhost', '7233']);
    const namespaceJob = composeEnv(services['temporal-namespace']);
    expect(namespaceJob['TEMPORAL_ADDRESS']).toBe(settings.TEMPORAL_ADDRESS);
    expect(namespaceJob['NAMESPACE']).toBe(settings.TEMPORAL_NAMESPACE);
    expect(composeEnv(services['temporal-ui'])['TEMPORAL_ADDRESS']).toBe(settings.TEMPORAL_ADDRESS);
    expect(services['temporal-schema'].depends_on?.['postgres']?.condition).toBe('service_healthy');
    expect(services.temporal.depends_on?.['temporal-schema']?.condition).toBe('service_completed_successfully');
    for (const role of [services.api, services.worker]) {
      expect(role.depends_on?.['postgres']?.condition).toBe('service_healthy');
      expect(role.depends_on?.['temporal-namespace']?.condition).toBe('service_completed_successfully');
    }
    for (const job of [services['temporal-schema'], services['temporal-namespace']]) {
      const script = (Array.isArray(job.command) ? job.command : [job.command ?? '']).at(-1) ?? '';
      expect(job.volumes).toContain('./temporal:/scripts:ro');
      expect(existsSync(join(REPO, 'hosting/temporal', script.replace('/scripts/', ''))), script).toBe(true);
    }
    expect(services.api.ports?.map((port) => port.split(':').at(-1))).toEqual([String(settings.PORT)]);
    for (const service of Object.values(services))
      for (const volume of service.volumes ?? []) {
        const [source = ''] = volume.split(':');
        if (!source.startsWith('.')) expect(Object.keys(compose.volumes)).toContain(source);
      }

    // Kubernetes: the frontend Service of Temporal's chart installed as release `temporal`, and the
    // namespace the chart creates.
    const kube = settingsOf('kubernetes api');
    expect(kube.TEMPORAL_ADDRESS).toBe('temporal-frontend:7233');
    expect(helmValues.server.config.namespaces.namespace.map((namespace) => namespace.name)).toContain(
      kube.TEMPORAL_NAMESPACE,
    );
    for (const store of [helmValues.server.config.persistence.default, helmValues.server.config.persistence.visibility])
      expect(store.sql['driver']).toBe('postgres12');
    expect(helmValues.server.config.persistence.visibility.sql['database']).not.toBe(
      helmValues.server.config.persistence.default.sql['database'],
    );
    // The api Service reaches the api pods' port, and selects only them.
    const apiPod = apiDeployment.spec.template;
    expect(apiService.spec.selector).toEqual(apiDeployment.spec.selector.matchLabels);
    expect(apiPod.metadata.labels).toMatchObject(apiDeployment.spec.selector.matchLabels);
    expect(workerDeployment.spec.template.metadata.labels).toMatchObject(workerDeployment.spec.selector.matchLabels);
    expect(workerDeployment.spec.selector.matchLabels).not.toEqual(apiService.spec.selector);
    expect(apiPod.spec.containers[0]!.ports.map((port) => port.name)).toContain(apiService.spec.ports[0]!.targetPort);

    // kubectl apply -k applies the ConfigMap and the two Deployments, never the example Secret or the Helm values.
    const kustomization = z
      .object({ resources: z.array(z.string()) })
      .passthrough()
      .parse(parse(read('hosting/kubernetes/kustomization.yaml')));
    expect(kustomization.resources.sort()).toEqual(['api.yaml', 'configmap.yaml', 'worker.yaml']);
  });

  it('probe liveness and readiness where the service answers them', () => {
    const api = loadSettings(processes.find((process) => process.where === 'kubernetes api')!.env);
    const worker = loadSettings(processes.find((process) => process.where === 'kubernetes worker')!.env);
    for (const [spec, port] of [
      [apiDeployment, api.PORT],
      [workerDeployment, healthPort(worker)],
    ] as const) {
      const main = spec.spec.template.spec.containers[0]!;
      for (const probe of [main.livenessProbe, main.readinessProbe, main.startupProbe]) {
        const named = main.ports.find((candidate) => candidate.name === probe?.httpGet.port);
        expect([spec.metadata.name, named?.containerPort]).toEqual([spec.metadata.name, port]);
      }
      expect(main.livenessProbe.httpGet.path).toBe('/livez');
      expect(main.readinessProbe.httpGet.path).toBe('/readyz');
    }
    // The worker's health port listens where the kubelet reaches it.
    expect(worker.HOST).toBe('0.0.0.0');
    // Compose's health checks ask the same paths on the ports each process serves.
    const composeApi = loadSettings(composeEnv(services.api));
    const composeWorker = loadSettings(composeEnv(services.worker));
    expect(services.api.healthcheck?.test.join(' ')).toContain(`http://127.0.0.1:${composeApi.PORT}/readyz`);
    expect(services.worker.healthcheck?.test.join(' ')).toContain(
      `http://127.0.0.1:${healthPort(composeWorker)}/readyz`,
    );
    // The API serves the probe paths without a key, and the worker's health server serves them too.
    const routes = sourceFiles('src/api/routes').map((file) => readFileSync(file, 'utf8'));
    for (const path of ['/livez', '/readyz']) {
      expect(
        routes.some((text) => text.includes(`path: '${path}'`) && text.includes("auth: 'none'")),
        `an API route ${path} without a key`,
      ).toBe(true);
      expect(
        sourceFiles('src').some((file) => !file.includes('/api/') && readFileSync(file, 'utf8').includes(`'${path}'`)),
        `the worker's health server serves ${path}`,
      ).toBe(true);
    }
  });

  it('give a stopping worker the time to finish a request at its timeout', () => {
    const timeoutS = REQUEST_TIMEOUT_MS / 1000;
    expect(workerDeployment.spec.template.spec.terminationGracePeriodSeconds).toBeGreaterThan(timeoutS);
    expect(Number(/^(\d+)s$/.exec(services.worker.stop_grace_period ?? '')?.[1])).toBeGreaterThan(timeoutS);
    // The API stops taking requests before it closes; Compose stops it within its own period.
    expect(JSON.stringify(apiDeployment.spec.template.spec.containers[0]!.lifecycle)).toContain('preStop');
    expect(services.api.stop_grace_period).toMatch(/^\d+s$/);
    // More than one worker, so that one stopping has its runs taken over.
    expect(workerDeployment.spec.replicas).toBeGreaterThan(1);
    expect(services.worker.deploy?.replicas).toBeGreaterThan(1);
  });

  it('run Temporal scripts that parse, with commands the Temporal CLI of the admin-tools image accepts', async () => {
    for (const script of ['hosting/temporal/setup-postgres.sh', 'hosting/temporal/create-namespace.sh']) {
      const checked = spawnSync('sh', ['-n', join(REPO, script)], { encoding: 'utf8' });
      expect([script, checked.status, checked.stderr]).toEqual([script, 0, '']);
    }
    // The admin-tools image carries the CLI release that `npm start` builds (…-cli-1.5.0).
    const { path } = await findTemporalCli();
    if (path === undefined)
      throw new Error('no Temporal CLI on this machine (README: npm start builds one; .ci/run installs it)');
    const inImage = /-cli-(\d+\.\d+)\.\d+$/.exec(tagOf(services['temporal-namespace'].image))?.[1];
    expect(TEMPORAL_CLI_VERSION.startsWith(`${inImage}.`)).toBe(true);
    const text = read('hosting/temporal/create-namespace.sh');
    const commands = [...text.matchAll(/temporal (operator [^>\n;]+?)(?=\s*(?:>|;|$|\n))/gm)].map((match) => match[1]!);
    expect(commands.length).toBe(3);
    for (const command of commands) {
      const args = command
        .replaceAll('"$TEMPORAL_ADDRESS"', 'temporal:7233')
        .replaceAll('"$NAMESPACE"', 'default')
        .replaceAll('"$RETENTION"', '72h')
        .split(/\s+/);
      // With --help the CLI checks every flag (an unknown one is an error) and runs nothing.
      const checked = spawnSync(path, [...args, '--help'], { encoding: 'utf8', timeout: 30_000 });
      expect([command, checked.stderr]).not.toEqual([
        command,
        expect.stringMatching(/unknown (flag|command)|invalid argument/i),
      ]);
      expect([command, checked.status]).toEqual([command, 0]);
    }
  });
});
