# Build: docker build -t argocd-image-updater .
# The image carries what Argo CD Image Updater's image carries for ext:
# login scripts: the AWS CLI (`aws ecr get-login-password`), git and an
# SSH client. Without them, the image is smaller (ECR and Google
# credentials work natively without a script: docs/credentials-native.md):
#        docker build --build-arg WITH_SCRIPT_TOOLS=false -t argocd-image-updater:slim .

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=unknown
RUN make build VERSION=${VERSION} COMMIT=${COMMIT}

FROM alpine:3.22
ARG WITH_SCRIPT_TOOLS=true
# ca-certificates for registries and git over TLS; gnupg to read a commit
# signing key named by ID from a mounted GnuPG keyring; the shell that
# ext: credential scripts run with comes with the base image.
RUN apk add --no-cache ca-certificates gnupg tini \
    && if [ "${WITH_SCRIPT_TOOLS}" = "true" ]; then apk add --no-cache aws-cli git openssh-client; fi \
    && addgroup -g 65532 -S updater && adduser -u 65532 -S -G updater -h /app updater \
    && mkdir -p /app/config /app/scripts && chown -R updater:updater /app
COPY --from=build /src/bin/argocd-image-updater /usr/local/bin/argocd-image-updater
# The v1.x line's binary is /manager, which argocd-operator's Deployment
# runs; under that name `run` runs as that line does (docs/configuration.md).
RUN ln -s /usr/local/bin/argocd-image-updater /manager
USER 65532:65532
WORKDIR /app
# tini reaps the children of ext: scripts, which the controller, as PID 1,
# would otherwise leave as zombies.
ENTRYPOINT ["/sbin/tini", "--", "/usr/local/bin/argocd-image-updater"]
CMD ["run"]
