# syntax=docker/dockerfile:1

# Image for the retention service: retentiond (entrypoint) and retentionctl (operator CLI), both static binaries.
#
#   make image                         # docker build, stamped with the version and revision (retention-local:dev)
#   docker build -t retention .
#   docker run --rm -e DATABASE_URL=postgres://... -e AUTH_HS256_SECRET=... -p 8080:8080 retention
#   docker run --rm --entrypoint /usr/local/bin/retentionctl -e AUTH_HS256_SECRET=... retention token
#
# docker-compose.yml runs it with PostgreSQL.

FROM golang:1.26-bookworm AS build
WORKDIR /src
# Dependencies first, so that a source-only change reuses this layer.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download
COPY . .
# The version and revision `retentionctl version` shows: the build context has no .git, so they come as build
# arguments (make image passes them).
ARG VERSION=dev
ARG REVISION=unknown
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION} -X main.revision=${REVISION}" \
    -o /out/ ./cmd/retentiond ./cmd/retentionctl

# Static binaries need no libc: distroless has CA certificates, tzdata and a nonroot user, and no shell.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/retentiond /out/retentionctl /usr/local/bin/
# The service defaults to 127.0.0.1:8080, which is unreachable from outside a container.
ENV HTTP_ADDR=0.0.0.0:8080
EXPOSE 8080
# nonroot (65532), numeric so that runAsNonRoot checks can verify it.
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/retentiond"]
