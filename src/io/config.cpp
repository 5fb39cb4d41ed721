// config: see config.h
