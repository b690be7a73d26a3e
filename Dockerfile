# mailhost_exporter container image.
#
#   docker build -t mailhost_exporter .
#   docker run -p 19587:19587 mailhost_exporter --demo
#   docker run -p 19587:19587 \
#     -v "$PWD/config.yml:/etc/mailhost_exporter/config.yml:ro" \
#     -v "$PWD/token:/run/secrets/mailhost:ro" mailhost_exporter
#
# The config names the token file (api.token_file: /run/secrets/mailhost); the token is never
# passed as an argument or baked into the image.
#
# What the exporter learned survives a restart when it has a volume to keep it in
# (--storage.path; README.md, "Across restarts"): a named volume at /var/lib/mailhost_exporter,
# with the arguments given in full (they replace CMD):
#
#   docker run -p 19587:19587 \
#     -v "$PWD/config.yml:/etc/mailhost_exporter/config.yml:ro" \
#     -v "$PWD/token:/run/secrets/mailhost:ro" \
#     -v mailhost-state:/var/lib/mailhost_exporter mailhost_exporter \
#     --config.file=/etc/mailhost_exporter/config.yml --storage.path=/var/lib/mailhost_exporter
#
# The image holds that directory, empty and owned by the nonroot user, so that Docker gives a
# new named volume mounted there the same owner (a host directory mounted there must be
# writable by uid 65532). No VOLUME: it would leave an anonymous volume behind every container
# and still lose the state on the next `docker run`. CMD keeps storage off, as the binary does:
# a container without a volume has nowhere that outlives it (its writable layer goes with
# `docker run --rm`, and `--read-only` has none); Kubernetes mounts one and passes the flags
# (deploy/).

FROM rust:1.95-bookworm AS build
WORKDIR /src
# The storage directory, copied empty into the runtime stage, which has no shell to make it.
RUN mkdir /state

# Dependencies first, in their own layer: it is rebuilt only when a manifest or Cargo.lock change.
COPY Cargo.toml Cargo.lock build.rs ./
COPY crates/mailhost-sim/Cargo.toml crates/mailhost-sim/
RUN mkdir -p src tests crates/mailhost-sim/src/bin crates/mailhost-sim/tests \
    && echo 'fn main() {}' > src/main.rs \
    && echo 'fn main() {}' > crates/mailhost-sim/src/bin/mailhost_sim.rs \
    && touch src/lib.rs tests/tests.rs crates/mailhost-sim/src/lib.rs crates/mailhost-sim/tests/tests.rs \
    && cargo build --release --locked --bin mailhost_exporter \
    && rm -rf src crates/mailhost-sim/src

# Then the sources; the revision comes from a build argument (there is no .git in the context).
ARG REVISION=unknown
ENV MAILHOST_BUILD_REVISION=${REVISION}
COPY src src
COPY crates/mailhost-sim/src crates/mailhost-sim/src
RUN touch src/main.rs src/lib.rs \
        crates/mailhost-sim/src/lib.rs \
    && cargo build --release --locked --bin mailhost_exporter

# Runtime: distroless with glibc and CA certificates, no shell, running as nonroot. Time-zone
# data is compiled into the binary, so none is needed on the image.
FROM gcr.io/distroless/cc-debian12:nonroot
ARG REVISION=unknown
LABEL org.opencontainers.image.title="mailhost_exporter" \
      org.opencontainers.image.description="Prometheus exporter for an email provider's Management API: Delivery quota, sending statistics, migrations and mailboxes" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.documentation="README.md"
COPY --from=build /src/target/release/mailhost_exporter /usr/local/bin/mailhost_exporter
COPY examples/config.yml /etc/mailhost_exporter/config.example.yml
COPY --from=build --chown=65532:65532 /state /var/lib/mailhost_exporter
# distroless nonroot
USER 65532:65532
EXPOSE 19587
ENTRYPOINT ["/usr/local/bin/mailhost_exporter"]
CMD ["--config.file=/etc/mailhost_exporter/config.yml"]
