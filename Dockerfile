# The service's image: one image for both roles, chosen by SERVICE_ROLE (api or worker) at run time.
# hosting/docker-compose.production.yml and hosting/kubernetes/ run it; test/hosting.test.ts checks that
# they agree with this file (base image, command, user, port). No Docker engine runs in CI, so the image
# itself is not built there.
#
#   docker build -t integration-service:0.1.0 .
#
# The tag is package.json's version; push it to your registry and name it in the manifests.

# The build: every dependency (tsc, tsx), then `npm run build`: the server as plain JavaScript in
# dist/ and the prebuilt workflow bundle dist/workflow-bundle.js (scripts/build.ts).
FROM node:20.19.5-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# Not `npm ci`: package-lock.json lists only the native builds of the platform it was made on (swc's,
# rollup's), and `npm ci` refuses a lock file that lacks the others (.ci/run says the same). `npm install
# --no-save` takes the locked versions all the same.
RUN npm install --no-audit --no-fund --no-save
COPY src ./src
COPY activities ./activities
COPY workflows ./workflows
COPY scripts ./scripts
COPY tsconfig.json tsconfig.build.json ./
RUN npm run build

# An exact release: package.json's engines ask for Node.js >= 20.16 (the same Node as docker-compose.yml).
FROM node:20.19.5-bookworm-slim

WORKDIR /app
# Only what the service runs on: no devDependencies (tsx, @temporalio/testing, the build tools).
COPY package.json package-lock.json ./
RUN npm install --omit=dev --no-audit --no-fund --no-save && npm cache clean --force
COPY bin ./bin
# The sources stay beside the build: the workflow bundle's manifest is checked against them at start.
COPY src ./src
COPY activities ./activities
COPY workflows ./workflows
COPY config ./config
COPY --from=build /app/dist ./dist

ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=3003
EXPOSE 3003
# The image's own unprivileged user; the service writes nothing under /app (thread marks go to $TMPDIR).
USER node
# node itself, not `npm run serve`: SIGTERM from `docker stop` or Kubernetes reaches the service, which
# drains (a worker finishes the steps in flight, then exits; docs/operations.md, "Stopping a worker").
CMD ["node", "dist/src/main.js"]
