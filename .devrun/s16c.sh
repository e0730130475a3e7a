#!/usr/bin/env bash
# Session 16: wgmma's no-swizzle descriptor conventions (.devrun/wgmma/micro.cu, built here).
nvidia-smi -L
./.devbin/micro
