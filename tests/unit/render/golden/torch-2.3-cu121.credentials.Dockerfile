# Rendered by imagectl 0.1.0 for torch-2.3-cu121; edit the templates, not this file.
# A first stage installs with the index credentials (imagectl-pip.netrc).  They stay in this stage's layers, which
# are never tagged or pushed: the final stage below copies the installed environment (/opt/venv), not the file.
FROM docker.io/nvidia/cuda:12.1.1-runtime-ubuntu22.04 AS imagectl-install
# SOURCE_DATE_EPOCH (a build arg, one constant for every image, never the clock): pip and Python write hash-checked
# .pyc files (PEP 552), so the same lock gives the same bytes.
ARG SOURCE_DATE_EPOCH

ENV DEBIAN_FRONTEND=noninteractive \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1

# Python 3.10: the base image's own when it has it, else from the OS archive.
RUN set -eu; \
    if ! python3.10 -c 'import ensurepip, venv' >/dev/null 2>&1; then \
      apt-get update; \
      apt-get install -y --no-install-recommends python3.10 python3.10-venv ca-certificates; \
      apt-get clean; \
      rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log /var/log/alternatives.log \
             /var/cache/ldconfig/aux-cache /var/cache/debconf/*-old /var/lib/dpkg/*-old; \
    fi; \
    python3.10 -m venv /opt/venv
ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH

COPY imagectl-pip.netrc /opt/imagectl-secrets/.netrc
COPY lock-1-packages.txt /opt/imagectl/lock-1-packages.txt
RUN NETRC=/opt/imagectl-secrets/.netrc HOME=/opt/imagectl-secrets pip install --no-cache-dir --no-deps --require-hashes --only-binary :all: -r /opt/imagectl/lock-1-packages.txt

COPY extra-requirements.txt extras-lock.txt /opt/imagectl/
RUN NETRC=/opt/imagectl-secrets/.netrc HOME=/opt/imagectl-secrets pip install --no-cache-dir --no-deps --require-hashes --only-binary :all: -r /opt/imagectl/extras-lock.txt

FROM docker.io/nvidia/cuda:12.1.1-runtime-ubuntu22.04
# SOURCE_DATE_EPOCH (a build arg, one constant for every image, never the clock): pip and Python write hash-checked
# .pyc files (PEP 552), so the same lock gives the same bytes.
ARG SOURCE_DATE_EPOCH

ENV DEBIAN_FRONTEND=noninteractive \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1

# Python 3.10: the base image's own when it has it, else from the OS archive.
RUN set -eu; \
    if ! python3.10 -c 'import ensurepip, venv' >/dev/null 2>&1; then \
      apt-get update; \
      apt-get install -y --no-install-recommends python3.10 python3.10-venv ca-certificates; \
      apt-get clean; \
      rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log /var/log/alternatives.log \
             /var/cache/ldconfig/aux-cache /var/cache/debconf/*-old /var/lib/dpkg/*-old; \
    fi; \
    python3.10 -m venv /opt/venv
ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH

# The OS packages the framework's JIT compilers need ([framework] jit_packages) that the base image lacks, from
# the OS archive: shared by every profile on the same base and Python.
RUN set -eu; \
    missing=""; \
    for p in g++ gcc python3.10-dev; do \
      [ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)" = installed ] || missing="$missing $p"; \
    done; \
    if [ -n "$missing" ]; then \
      apt-get update; \
      apt-get install -y --no-install-recommends $missing; \
      apt-get clean; \
      rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log /var/log/alternatives.log \
             /var/cache/ldconfig/aux-cache /var/cache/debconf/*-old /var/lib/dpkg/*-old; \
    fi

# The lock: every package with its hashes, in layers that change at different rates ([framework] layers), so
# profiles with the same CUDA pins share the first and an upgrade moves only what changed.
COPY --from=imagectl-install /opt/venv /opt/venv

COPY lock.txt constraints.txt /opt/imagectl/
COPY imagectl-check.py /opt/imagectl/check.py
COPY imagectl-entry.sh /opt/imagectl/entry.sh

# A team's extra packages, installed in the first stage with the lock (the request and its lock, as a record).
COPY extra-requirements.txt extras-lock.txt /opt/imagectl/

# The entry check (copied with the check script): one line on stderr when the node's NVIDIA driver is below this
# CUDA's floor, then the command.
ENTRYPOINT ["/bin/sh", "/opt/imagectl/entry.sh"]

ENV IMAGECTL_CUDNN_VERSION="8.9.2.26" \
    IMAGECTL_NCCL_VERSION="2.20.5" \
    IMAGECTL_PROFILE="torch-2.3-cu121" \
    NVIDIA_DRIVER_CAPABILITIES="compute,utility" \
    NVIDIA_REQUIRE_CUDA="cuda>=12.1" \
    NVIDIA_VISIBLE_DEVICES="all" \
    PIP_CONSTRAINT="/opt/imagectl/constraints.txt" \
    TORCH_VERSION="2.3.1"
LABEL imagectl.cuda="12.1" \
      imagectl.cudnn="8.9.2.26" \
      imagectl.flavor="runtime" \
      imagectl.framework="torch" \
      imagectl.framework.version="2.3.1" \
      imagectl.min-driver="530.30.02" \
      imagectl.nccl="2.20.5" \
      imagectl.os="ubuntu22.04" \
      imagectl.packages="nvidia-cuda-runtime-cu12==12.1.105,nvidia-cudnn-cu12==8.9.2.26,nvidia-nccl-cu12==2.20.5,torch==2.3.1,torchaudio==2.3.1,torchvision==0.18.1,triton==2.3.1" \
      imagectl.profile="torch-2.3-cu121" \
      imagectl.python="3.10" \
      imagectl.version="0.1.0" \
      org.opencontainers.image.base.name="docker.io/nvidia/cuda:12.1.1-runtime-ubuntu22.04" \
      org.opencontainers.image.description="PyTorch 2.3.1 with CUDA 12.1, Python 3.10" \
      org.opencontainers.image.title="torch-2.3-cu121" \
      org.opencontainers.image.vendor="imagectl" \
      org.opencontainers.image.version="2.3.1"
