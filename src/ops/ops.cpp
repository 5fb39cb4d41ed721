// ops contracts; see the headers in this directory
