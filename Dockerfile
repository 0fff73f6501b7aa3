# Build: docker build -t argocd-image-updater .
# With the AWS CLI, for ext: login scripts that call `aws ecr get-login-password`:
#        docker build --build-arg WITH_AWS_CLI=true -t argocd-image-updater:aws .
# (ECR credentials work natively without it: see docs/credentials-native.md.)

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=unknown
RUN make build VERSION=${VERSION} COMMIT=${COMMIT}

FROM alpine:3.22
ARG WITH_AWS_CLI=false
# ca-certificates for registries and git over TLS; gnupg to read a commit
# signing key named by ID from a mounted GnuPG keyring; the shell that
# ext: credential scripts run with comes with the base image.
RUN apk add --no-cache ca-certificates gnupg tini \
    && if [ "${WITH_AWS_CLI}" = "true" ]; then apk add --no-cache aws-cli; fi \
    && addgroup -g 65532 -S updater && adduser -u 65532 -S -G updater -h /app updater \
    && mkdir -p /app/config /app/scripts && chown -R updater:updater /app
COPY --from=build /src/bin/argocd-image-updater /usr/local/bin/argocd-image-updater
USER 65532:65532
WORKDIR /app
# tini reaps the children of ext: scripts, which the controller, as PID 1,
# would otherwise leave as zombies.
ENTRYPOINT ["/sbin/tini", "--", "/usr/local/bin/argocd-image-updater"]
CMD ["run"]
