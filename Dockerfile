# Bouncer's image, for those who build with a container engine:
#
#   docker build --build-arg VERSION=v1.2.3 -t bouncer:v1.2.3 .
#
# make image builds the same image without one (deploy/image); its test
# holds this file to that image's user, ports, environment, entry point
# and labels. See docs/deploy.md, "The image".

FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG VERSION=""
ARG TARGETOS=linux
ARG TARGETARCH=amd64
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH GOAMD64=v1 GOARM64=v8.0 \
    go build -trimpath -buildvcs=false -ldflags "-s -w -X main.version=$VERSION" \
      -o /out/usr/local/bin/bouncer ./cmd/bouncer
RUN mkdir -p /out/etc/bouncer /out/etc/ssl/certs /out/home/nonroot /out/tmp && \
    cp /etc/ssl/certs/ca-certificates.crt /out/etc/ssl/certs/ && \
    printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' > /out/etc/passwd && \
    printf 'root:x:0:\nnonroot:x:65532:\n' > /out/etc/group && \
    chown 65532:65532 /out/home/nonroot && chmod 0700 /out/home/nonroot && chmod 1777 /out/tmp

FROM scratch
ARG VERSION=""
ARG REVISION=""
COPY --from=build /out/ /
USER 65532:65532
WORKDIR /
ENV PATH=/usr/local/bin \
    BOUNCER_CONFIG=/etc/bouncer \
    BOUNCER_HTTP_ADDR=:8080 \
    BOUNCER_GRPC_ADDR=:8081 \
    BOUNCER_ADMIN_ADDR=:6070
# The JSON API, gRPC (RLS v3, RLQS) and admin (health, metrics).
EXPOSE 8080/tcp 8081/tcp 6070/tcp
LABEL org.opencontainers.image.title="bouncer" \
      org.opencontainers.image.source="https://github.com/bouncerhq/bouncer" \
      org.opencontainers.image.version="$VERSION" \
      org.opencontainers.image.revision="$REVISION" \
      org.opencontainers.image.licenses="Apache-2.0"
ENTRYPOINT ["/usr/local/bin/bouncer"]
CMD ["serve"]
