# mcpmux: a static binary on a minimal, non-root image, under an init that
# reaps zombies.
#
#   docker build -t mcpmux .
#   docker run --rm -p 127.0.0.1:7300:7300 \
#     -v "$PWD/deploy/docker:/etc/mcpmux:ro" -e READER_TOKEN=... mcpmux
#
# Children started by mcpmux run inside this container, so their programs
# must be in it too: see Dockerfile.runtimes for an image with Node (npx) and
# Python (uvx), or build your own FROM this one.

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags="-s -w -X github.com/mcpmux/mcpmux/mux.Version=${VERSION}" \
      -o /out/mcpmux ./cmd/mcpmux

# tini-static: PID 1 must reap the orphans a child's wrapper leaves behind.
FROM debian:bookworm-slim AS init
RUN apt-get update && apt-get install -y --no-install-recommends tini && rm -rf /var/lib/apt/lists/*

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=init /usr/bin/tini-static /usr/bin/tini
COPY --from=build /out/mcpmux /usr/local/bin/mcpmux
USER nonroot:nonroot
EXPOSE 7300
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/mcpmux"]
CMD ["serve", "--config", "/etc/mcpmux/mcpmux.toml"]
