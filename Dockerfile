# syntax=docker/dockerfile:1
# Cinder in a container: the same single executable `bun run build` makes, on a minimal base.
#   docker build -t cinder .
#   docker run -p 8080:8080 -v cinder-data:/data cinder
# Configuration: CINDER_* environment variables (see README). Data (SQLite, export files) lives in /data.

ARG BUN_VERSION=1.4.5

FROM oven/bun:${BUN_VERSION} AS build
WORKDIR /src
COPY package.json bun.lock ./
COPY patches ./patches
RUN bun install --frozen-lockfile --production
COPY tsconfig.json ./
COPY scripts ./scripts
COPY src ./src
RUN bun run build \
 && ./dist/cinder --help > /dev/null \
 && mkdir -p /out/data \
 && cp dist/cinder /out/cinder

# glibc (+ libgcc/libstdc++) and CA certificates, no shell, no package manager; runs as uid 65532.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/cinder /usr/local/bin/cinder
COPY --from=build --chown=65532:65532 /out/data /data
ENV CINDER_DATA_DIR=/data \
    CINDER_HOST=0.0.0.0
USER 65532:65532
WORKDIR /data
VOLUME ["/data"]
EXPOSE 8080
# The binary checks itself (distroless has no curl): GET http://127.0.0.1:<port>/healthz, the port serve listens on: $CINDER_PORT, else $PORT, else 8080
# (at $CINDER_HOST instead when it names one address).
HEALTHCHECK --interval=30s --timeout=5s --start-period=15s --retries=3 CMD ["/usr/local/bin/cinder", "healthcheck"]
# SIGTERM (docker stop) drains in-flight requests and exits 0.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/cinder"]
CMD ["serve"]
