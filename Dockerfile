# mcpmux: a static binary on a minimal, non-root image.
#
#   docker build -t mcpmux .
#   docker run -i --rm -v "$PWD/deploy:/etc/mcpmux:ro" mcpmux
#
# Children are started inside this container, so their programs must be in it
# too: build your own image FROM this one (or copy /usr/local/bin/mcpmux into
# an image that has them).

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags="-s -w -X github.com/mcpmux/mcpmux/mux.Version=${VERSION}" \
      -o /out/mcpmux ./cmd/mcpmux

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/mcpmux /usr/local/bin/mcpmux
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/mcpmux"]
CMD ["serve", "--config", "/etc/mcpmux/mcpmux.toml"]
