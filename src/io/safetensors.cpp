// safetensors: see safetensors.h
