# A minimal bashcall image: the static bashcall, a static bash (Debian's
# bash-static) and /tmp, nothing else. The container runtime supplies
# /proc and /dev/null, which bashcall needs (README, "Containers").
#
#   docker build -t bashcall .
#   docker run -d --init --name bc -v "$PWD:/work" bashcall
#   echo '{"name":"bash","arguments":{"command":"ls","description":"List files"},"session":{"id":"A","cwd":"/work"}}' |
#       docker exec -i bc bashcall
#   docker exec bc bashcall doctor
#
# Every call of a session must run in the one long-lived container (one
# PID namespace): a background task lives as long as that namespace does.
# --init keeps bashcall from being its PID 1, which cannot reap adopted
# processes. The default command, serve, keeps the container up and also
# answers calls dropped into /var/spool/bashcall.

FROM golang:1.26-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends bash-static && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /rootfs/bin/bashcall . && \
    cp /bin/bash-static /rootfs/bin/bash && \
    mkdir -m 1777 /rootfs/tmp && \
    mkdir -m 0700 /rootfs/root && \
    mkdir /rootfs/work /rootfs/dev /rootfs/proc

FROM scratch
COPY --from=build /rootfs /
ENV PATH=/bin HOME=/root
WORKDIR /work
ENTRYPOINT ["/bin/bashcall"]
CMD ["serve", "-spool", "/var/spool/bashcall"]
