# Rendered by imagectl 0.1.0 for torch-2.3-cu118-devel; edit the templates, not this file.
FROM mirror.example.com/hub/nvidia/cuda:11.8.0-devel-ubuntu22.04
# SOURCE_DATE_EPOCH (a build arg, one constant for every image, never the clock): pip and Python write hash-checked
# .pyc files (PEP 552), so the same lock gives the same bytes.
ARG SOURCE_DATE_EPOCH

ENV DEBIAN_FRONTEND=noninteractive \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1

# Python 3.10: the base image's own when it has it, else from the OS archive (mirror http://apt.example.com/ubuntu).
RUN set -eu; \
    if ! python3.10 -c 'import ensurepip, venv' >/dev/null 2>&1; then \
      for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do \
        [ -f "$f" ] && sed -i -E 's#https?://(archive|security|ports)\.ubuntu\.com/ubuntu(-ports)?/?#http://apt.example.com/ubuntu/#g' "$f"; \
      done; \
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
# the OS archive (mirror http://apt.example.com/ubuntu): shared by every profile on the same base and Python.
RUN set -eu; \
    missing=""; \
    for p in g++ gcc python3.10-dev; do \
      [ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)" = installed ] || missing="$missing $p"; \
    done; \
    if [ -n "$missing" ]; then \
      for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do \
        [ -f "$f" ] && sed -i -E 's#https?://(archive|security|ports)\.ubuntu\.com/ubuntu(-ports)?/?#http://apt.example.com/ubuntu/#g' "$f"; \
      done; \
      apt-get update; \
      apt-get install -y --no-install-recommends $missing; \
      apt-get clean; \
      rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log /var/log/alternatives.log \
             /var/cache/ldconfig/aux-cache /var/cache/debconf/*-old /var/lib/dpkg/*-old; \
    fi

# The lock: every package with its hashes, in layers that change at different rates ([framework] layers), so
# profiles with the same CUDA pins share the first and an upgrade moves only what changed.
COPY lock-1-packages.txt /opt/imagectl/lock-1-packages.txt
RUN pip install --no-cache-dir --no-deps --require-hashes --only-binary :all: -r /opt/imagectl/lock-1-packages.txt


COPY lock.txt constraints.txt /opt/imagectl/
COPY imagectl-check.py /opt/imagectl/check.py
COPY imagectl-entry.sh /opt/imagectl/entry.sh

# The entry check (copied with the check script): one line on stderr when the node's NVIDIA driver is below this
# CUDA's floor, then the command.
ENTRYPOINT ["/bin/sh", "/opt/imagectl/entry.sh"]

ENV CUDA_HOME="/usr/local/cuda" \
    IMAGECTL_CUDNN_VERSION="8.7.0.84" \
    IMAGECTL_NCCL_VERSION="2.20.5" \
    IMAGECTL_PROFILE="torch-2.3-cu118-devel" \
    NVIDIA_DRIVER_CAPABILITIES="compute,utility" \
    NVIDIA_REQUIRE_CUDA="cuda>=11.8" \
    NVIDIA_VISIBLE_DEVICES="all" \
    PIP_CONSTRAINT="/opt/imagectl/constraints.txt" \
    TORCH_VERSION="2.3.1"
LABEL imagectl.cuda="11.8" \
      imagectl.cudnn="8.7.0.84" \
      imagectl.flavor="devel" \
      imagectl.framework="torch" \
      imagectl.framework.version="2.3.1" \
      imagectl.min-driver="520.61.05" \
      imagectl.nccl="2.20.5" \
      imagectl.os="ubuntu22.04" \
      imagectl.packages="nvidia-cuda-runtime-cu11==11.8.89,nvidia-cudnn-cu11==8.7.0.84,nvidia-nccl-cu11==2.20.5,torch==2.3.1,torchaudio==2.3.1,torchvision==0.18.1,triton==2.3.1" \
      imagectl.profile="torch-2.3-cu118-devel" \
      imagectl.python="3.10" \
      imagectl.version="0.1.0" \
      org.opencontainers.image.base.name="docker.io/nvidia/cuda:11.8.0-devel-ubuntu22.04" \
      org.opencontainers.image.description="PyTorch 2.3.1 with CUDA 11.8, Python 3.10" \
      org.opencontainers.image.title="torch-2.3-cu118-devel" \
      org.opencontainers.image.vendor="imagectl" \
      org.opencontainers.image.version="2.3.1"
